// Package proofs is the ledger's side of the verifiable log (contract §16):
// the checkpoint signing key, the signer that makes a signed checkpoint
// (C2SP tlog-checkpoint, package client/evidence) at most every interval
// while the tree grows, keeps every one in a Pebble log of its own and
// publishes each on NATS, and the proofs the HTTP API serves: a
// proposal's history with inclusion proofs (an evidence bundle),
// consistency proofs between tree sizes, and the tree's C2SP tlog-tiles.
//
// The tree itself is the projection's (projections/tree.go): it is read
// through [Tree], which *projections.Store implements, and is exactly as
// far as the projection. The checkpoint log lives in <data>/checkpoints,
// outside the projection, so that an online rebuild (which replaces the
// projection's directory) keeps every checkpoint: the rebuilt tree is the
// same tree.
//
// Before signing a new tree head the signer checks that it extends the
// last one it signed (a consistency proof from its own tree): a ledger
// never signs a fork of its own history. When it does not (the
// projection was made from another stream), the signer stops signing
// and reports ErrForked through Problem until the operator resolves it.
//
// Several ledger processes folding the same stream (contract §11) build the
// same tree and so reach the same tree heads; each signs with its own key
// (a key per process, in its own data directory). Given the same
// --checkpoint-origin their notes for a size have the same text, so a
// watcher can merge their signatures into one cosigned note
// (evidence.Cosign), and a verifier holding any one of the keys accepts
// it.
package proofs
