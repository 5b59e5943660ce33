// Package ledger is the write side's envelope dialect, pure: it decodes MEW
// lifecycle envelopes in every accepted dialect into one canonical form,
// refuses bad input with specific errors, classifies envelopes into the
// lifecycle event types, computes the subject and the Nats-Msg-Id that
// makes retries idempotent, and prepares envelopes for publishing. It
// links nothing of NATS or Pebble: the ledger's log on JetStream (the
// LEDGER stream and the Appender) is package ledger/appendlog.
//
// Decoding ([Decode]) is pure and is shared with the projector, so the submit
// paths and the fold agree on what is valid. The original bytes are what is
// stored; the canonical form is derived from them whenever it is needed.
//
// Every submit path (HTTP, the submit service, the bridges) takes a body
// through one entry, [PrepareBodyStandalone] (which the Appender's
// PrepareBody, SubmitBody and AppendBody in ledger/appendlog call with its
// space, limits and clock): dialect detection, bare kernel proposals
// wrapped, every check, one decode. [PrepareEnvelope] is the same for an
// envelope, and for one the ledger writes itself.
package ledger
