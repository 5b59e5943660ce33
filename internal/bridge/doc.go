// Package bridge records a live MEW space into the ledger (contract §14,
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
//     plain requests and their responses, chats threaded under plain
//     messages, uncorrelated chat, stream data — "#id#..." text or binary
//     messages —, oversize frames) are counted by kind and skipped
//     (Filter); envelopes claiming to be the ledger's own are counted and
//     logged. An envelope the ledger refuses is logged with its code and
//     counted; the bridge goes on.
//   - One reader (the socket) never waits for the ledger: it queues
//     lifecycle envelopes in a backlog bounded by MaxBacklogBytes; one
//     writer appends them in receive order, in batches (Sink.AppendBatch,
//     through the group commit), retrying with backoff while the ledger
//     does not answer (appends are idempotent). What does not fit the
//     backlog is dropped, and the hole is a recorded gap.
//   - A read error ends the session at once (also an unanswered ping, an
//     unreadable participant list, a ping storm, an endless frame). The
//     bridge reconnects with capped, jittered backoff and, once joined
//     again and before anything new is appended, asks the ledger to
//     record the hole: a ledger/gap event written by the ledger with
//     sender "ledger", whose window starts at the last envelope the
//     ledger stored from the bridge (ledger.Gap). Stopping reports the
//     open gap without a reconnection time.
//   - Sessions (session.go): every append carries a ledger.BridgeMark;
//     the ledger derives each bridge's last stored envelope and whether a
//     gap covers it; a starting bridge reads that first and records the
//     gap of a session that died before appending anything.
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
