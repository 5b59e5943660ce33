// Package fold is the pure core of the read side: the fold of the log into
// per-proposal state (contract §5) — [Folder.Apply] and its applier —, the
// [State] contract it reads and writes through, the in-memory State
// [MemState], and the decoding of a stored message into an [Event].
//
// The fold is a deterministic function of the events it is given and of
// the State it reads: no wall clock, no map iteration order, no goroutines
// (DecodeAll's workers decode each event alone, and write only that
// event). It links nothing of Pebble or NATS (TestDependencies): it takes
// the envelope decoder (ledger.Decode) and types from package ledger, whose
// JetStream side (the appender) is package ledger/appendlog. The Pebble
// store (package projections) implements State with the optional
// [Prefetcher] and [StatsMutator], and the projector and rebuild (package
// projections/projector) feed it from JetStream.
//
// The fold's data-driven scripts are testdata/fold (run by
// TestFoldScripts; -rewrite rewrites their expected outputs).
package fold
