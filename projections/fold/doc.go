// Package fold is the pure core of the read side: the fold of the log into
// per-proposal state (SPEC §5) — [Folder.Apply] and its applier —, the
// [State] contract it reads and writes through, the in-memory State
// [MemState], and the decoding of a stored message into an [Event].
//
// The fold is a deterministic function of the events it is given and of
// the State it reads: no wall clock, no map iteration order, no goroutines
// (DecodeAll's workers decode each event alone, and write only that
// event). It imports nothing of Pebble or NATS (TestDependencies), and
// links no Pebble at all; it still links nats.go through package ledger,
// whose envelope decoder (ledger.Decode) and types it uses and which holds
// the appender too. The
// Pebble store (package projections) implements State with the optional
// [Prefetcher] and [StatsMutator], and the projector and rebuild feed it
// from JetStream.
package fold
