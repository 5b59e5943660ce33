// Package bridge records a live MEW space into the ledger (SPEC §14,
// `ledger bridge mew`): it joins the space's gateway over WebSocket as one
// more participant, exactly as MEW's own client does
// ({"type":"join","space","token","participantId","capabilities":[]},
// answered by system/welcome), and appends every lifecycle envelope the
// gateway delivers, in receive order, through one of the ledger's normal
// append paths (a Sink: the HTTP API, the submit service, or the Appender
// of the `ledger serve` process it runs in).
//
// Contract:
//
//   - Frames that are not lifecycle envelopes (system/*, capability/*,
//     plain requests and their responses, uncorrelated chat, stream frames
//     "#id#...", binary or oversize frames) are counted by kind and
//     skipped (Filter). An envelope the ledger refuses is logged with its
//     code and counted; the bridge goes on. An append the ledger does not
//     answer is retried with backoff (appends are idempotent).
//   - When the connection ends the bridge reconnects with backoff
//     (BackoffMin doubling to BackoffMax, for ever) and, once joined
//     again, asks the ledger to record the hole: a ledger/gap event
//     (ledger.Gap: bridge, last envelope seen, disconnection and
//     reconnection times, reason), written by the ledger with sender
//     "ledger". Stopping reports the open gap without a reconnection time.
//   - Eviction: a participant joining under the bridge's name replaces its
//     socket on the gateway (MEW v0.11.0 keeps the old socket open and
//     silent). The bridge notices it by reading the gateway's
//     GET /participants every ProbeInterval (its name missing, or listed
//     with other capabilities than its welcome gave), or a presence join
//     under its own name; it logs it loudly, records the gap and rejoins.
//   - History mode (Options.HistoryFile): instead of joining, the bridge
//     follows the gateway's .mew/logs/envelope-history.jsonl (new lines as
//     they come, rotation and truncation survived), takes each envelope as
//     delivered and its sender from the received record's participant
//     (History), and appends it under that sender's subject token
//     (AppendAs): an envelope whose from differs is folded invalid with
//     spoofed_sender. The sender "ledger" is refused (reserved_sender).
//   - Run owns every goroutine it starts and returns after ctx is
//     cancelled; Metrics and Health report what it does.
package bridge
