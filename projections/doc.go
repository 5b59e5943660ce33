// Package projections is the read side of the proposal ledger around its
// pure core: the Pebble store that holds the fold's state with its history
// and indexes (contract §6), the one pipeline that feeds it (fold → hand off
// → commit → settle), and the comparison of stores. It links no NATS: the
// loops that read the LEDGER stream into the pipeline (the projector,
// rebuild, the expirer) are package projections/projector.
//
// The fold itself ([fold.Folder.Apply]), the [fold.State] contract and the
// in-memory [fold.MemState] live in package projections/fold, which links
// no Pebble; the records are package model.
//
// Layout, one concern a file:
//
//   - store.go: options, open, close; errors.go: the package's sentinels
//   - store_keys.go: the key layout, every tag; decode_key.go: DecodeKey
//   - store_checkpoint.go: the applied sequence and its waiters
//   - store_meta.go: metadata that is not a function of the log
//   - store_read.go, store_query.go: reads and List
//   - store_changes.go: the change index (/v1/watch)
//   - store_events.go: the event index (/v1/events); store_postings.go:
//     its posting lists
//   - store_due.go: the expiry index's pages
//   - store_recent.go: the recent-proposal cache
//   - store_dump.go: Dump and Digest
//   - gaps.go: the bridges' recording gaps
//   - batch.go: the write overlay, a [fold.State]
//   - batch_aux.go: its small records (parked events, filed counts)
//   - batch_version.go: superseded versions of reused ids
//   - batch_prefetch.go: its [fold.Prefetcher]
//   - batch_handoff.go: the batch handed off while it commits
//   - batch_commit.go: Commit
//   - bloom.go: the Bloom filter of written keys that spares prefetch reads
//   - encode.go: the fast JSON encoders of the records (a proposal in the
//     bytes the API serves)
//   - pipeline.go: the Pipeline
//   - compare.go: Compare, on raw iterators of two stores
//
// Folding is a deterministic function of the log: no wall clock, no map
// iteration order, no goroutine decides a result. Everything that does I/O
// (committing to Pebble, acknowledging) lives in the Pipeline and the loops
// around it, so a rebuild from sequence 1 yields byte-for-byte the same
// store as the live projection.
package projections
