// Package monitor follows a ledger from outside (contract §16, "Witnesses
// and monitors"), with its public routes only: it fetches the signed
// checkpoint (GET /v1/checkpoint), checks its signature and, when witness
// keys are given, the witnesses' quorum; checks that it extends the last
// checkpoint the monitor accepted, by a consistency proof it builds itself
// from the ledger's hash tiles (golang.org/x/mod/sumdb/tlog, every tile
// checked against the signed root); downloads the new entry bundles
// (GET /v1/tile/entries/N[.p/W]), re-derives every leaf hash and compares
// it with the tree's, decodes every leaf, recomputes the root; and keeps
// a verified copy of the log in its state directory.
//
// # State directory
//
//	log.jsonl    the verified copy, in the export format of package
//	             archive (hash-chained JSON lines): `ledger import` takes
//	             it, and the imported ledger has the same leaves and root
//	checkpoint   the last checkpoint accepted (its signed note): the
//	             first Size lines of log.jsonl are its tree
//	target       while a newer checkpoint is being copied: that
//	             checkpoint, already checked to extend the accepted one
//	ledger.lock  held while a monitor uses the directory
//
// Lines are appended and synced before the checkpoint that covers them is
// written (atomically), so a monitor stopped at any point resumes: on
// start it re-reads the copy, re-verifies its chain and its root against
// the accepted checkpoint, drops lines past what it can vouch for, and
// continues.
//
// # Findings
//
// What the monitor refuses is a *Finding (errors.Is ErrFinding and one
// kind): ErrFork (the consistency proof fails), ErrRewritten (the same
// size with another root), ErrShrink (a smaller tree), ErrAltered (served
// leaves or tiles that do not hash to the signed tree, or do not decode),
// ErrMissing (the ledger does not serve entries its signed tree holds),
// ErrBadCheckpoint (a checkpoint that is not signed by the key, or lacks
// the witnesses' quorum). A finding never changes the state: the monitor
// keeps the last history it verified.
package monitor
