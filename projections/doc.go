// Package projections is the read side of the proposal ledger around its
// pure core: the Pebble store that holds the fold's state with its history
// and indexes (SPEC §6), the one pipeline that feeds it, the projector and
// rebuild loops that read the LEDGER stream into that pipeline, the
// expirer, and the comparison of stores.
//
// The fold itself ([fold.Folder.Apply]), the [fold.State] contract and the
// in-memory [fold.MemState] live in package projections/fold, which links
// no Pebble; the records in package model. Their names are
// aliased here (fold_alias.go, model_alias.go), so that callers name one
// package.
//
// Layout, one concern a file: store.go (options, open, close),
// store_checkpoint.go (the applied sequence and its waiters), store_read.go
// and store_query.go (reads and List), store_dump.go, batch.go (the write
// overlay, a [fold.State]), store_prefetch.go (its [fold.Prefetcher]),
// batch_handoff.go (the batch handed off while it commits), batch_commit.go
// (Commit), store_recent.go (the recent-proposal cache), written.go (the
// written filter), store_keys.go (the key layout, every tag), pipeline.go
// (fold → hand off → commit → settle), projector.go and rebuild.go (the
// loops around it).
//
// Folding is a deterministic function of the log: no wall clock, no map
// iteration order, no goroutine decides a result. Everything that does I/O
// (reading the stream, committing to Pebble, acknowledging) lives in the
// Pipeline and the loops around it, so a rebuild from sequence 1 yields
// byte-for-byte the same store as the live projection.
package projections
