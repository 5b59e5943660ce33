// Package projector holds the loops that read the LEDGER stream
// (JetStream) into a projections.Pipeline: the Projector (a durable
// consumer, the live projection), Rebuild (an ordered consumer from
// sequence 1, or up to a sequence, into a fresh store) and the Expirer
// (which appends the system's expiry events when deadlines pass). The
// store and the pipeline are package projections, which links no NATS.
//
// Layout: projector.go (the Projector, its sessions and the stream's
// messages as fold events), rebuild.go (Rebuild), expirer.go (the Expirer).
package projector
