// Package bench is `ledger bench`: it measures the ledger against the raw
// speed of the parts it is built on, in one run, on one machine, and prints
// a markdown table whose last line is
//
//	ratios: append=X append_sync=Y fold=Z
//
// Every figure is measured Reps times (at least 3) and reported as the
// median with its spread (min–max over the repetitions). A figure with a
// baseline measures the ledger and the baseline back to back in each
// repetition, alternating which goes first, and its ratio is the median of
// the per-repetition ratios ledger/baseline: load that drifts during the run
// (the machine is shared) hits both sides of a pair alike.
//
// The figures (issue 6):
//
//   - append: Appender.AppendMany (decode, validate, classify, subject,
//     Nats-Msg-Id, async publish with a bounded window) vs raw
//     jetstream.PublishAsync of the same bytes with the same Nats-Msg-Id and
//     the same window, each against a fresh embedded server (file storage,
//     nats-server's default sync interval) holding the LEDGER stream.
//   - append_sync: the same with sync_interval: always.
//   - fold: projector.Rebuild from the stream into a fresh store vs a
//     naive durable pull consumer that reads, updates and writes back a JSON
//     state record in Pebble per event and commits with Sync every 1000.
//   - live lag: time folded − time acknowledged, per sequence, while the
//     whole ledger (package app) takes appends at 80% of the measured
//     maximum append rate: with its default durability (fsync on every
//     write, 80% of the append_sync maximum) and, in full mode, with
//     nats-server's default sync interval (80% of the append maximum).
//   - reads: GET /v1/proposals/{id} and list pages over a real loopback HTTP
//     server, the real API handler, and a store holding Proposals proposals
//     folded directly (the real fold, no NATS).
//   - memory: peak RSS (VmHWM) of a child process that folds N events into
//     a fresh store, at two or three N.
//
// Everything runs in this process tree against embedded servers and stores
// in temporary directories, removed afterwards.
package bench
