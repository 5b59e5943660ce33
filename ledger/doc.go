// Package ledger is the write side of the proposal ledger: it decodes MEW
// lifecycle envelopes in every accepted dialect into one canonical form,
// refuses bad input with specific errors, classifies envelopes into the
// lifecycle event types, computes the Nats-Msg-Id that makes retries
// idempotent, creates or checks the LEDGER stream, and appends envelopes to it.
//
// Decoding ([Decode]) is pure and is shared with the projector, so the submit
// paths and the fold agree on what is valid. The original bytes are what is
// stored; the canonical form is derived from them whenever it is needed.
//
// Every submit path (HTTP, the submit service, the bridges) takes a body
// through one entry, [Appender.PrepareBody] (and [Appender.SubmitBody],
// [Appender.AppendBody] around it): dialect detection, bare kernel
// proposals wrapped, every check, one decode.
//
// Appending ([Appender]) goes through a group commit (SPEC §4): appends
// that arrive together are written together, as JetStream atomic batches
// or, where the server does not fsync each write, as pipelined messages
// ([CommitOptionsForSync]); each caller is answered with its own sequence,
// in acceptance order, once its group is stored; duplicate answers are
// verified against the stored message.
package ledger
