// Package projections is the read side of the proposal ledger: the pure fold
// of the log into per-proposal state (SPEC §5), the Pebble store that holds
// that state with its history and indexes (SPEC §6), the projector loop that
// feeds the fold from a durable JetStream consumer, and the expirer.
//
// The fold ([Folder.Apply]) is a deterministic function of the events it is
// given and of the [State] it reads: no wall clock, no map iteration order,
// no goroutines. Everything that does I/O (reading the stream, batching,
// committing to Pebble, acknowledging) lives in the loop around it, so a
// rebuild from sequence 1 yields byte-for-byte the same store as the live
// projection.
package projections
