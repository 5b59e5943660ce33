// Package appendlog is the ledger's log on JetStream: the LEDGER stream
// ([EnsureStream], [CheckStream], [StreamOptions]) and the [Appender] with
// its group committer and verified duplicates.
//
// The envelope dialect it publishes (decoding, refusals, [ledger.Prepared],
// [ledger.Result]) is package ledger, which is pure; this package is the
// only part of the write side that links nats.go.
//
// Every submit path (HTTP, the submit service, the bridges) takes a body
// through one entry, [Appender.PrepareBody] (and [Appender.SubmitBody],
// [Appender.AppendBody] around it): ledger.PrepareBodyStandalone with the
// Appender's space, limits and clock.
//
// Appending ([Appender]) goes through a group commit (contract §4): appends
// that arrive together are written together, as JetStream atomic batches
// or, where the server does not fsync each write, as pipelined messages
// ([CommitOptionsForSync]); each caller is answered with its own sequence,
// in acceptance order, once its group is stored; duplicate answers are
// verified against the stored message.
package appendlog
