package api

import (
	"time"
)

// Error codes of the online operations (contract §9) and as-of reads.
const (
	CodeBeyondLog = "beyond_log" // an as-of point after the end of the log
	CodeBusy      = "busy"       // another operation (rebuild, verify) is running
	CodeAsOfBusy  = "as_of_busy" // as-of folds: the caller's share (429) or the server's (503) is taken
)

// Phases of an online rebuild, in order.
const (
	RebuildIdle    = "idle"     // none has run since the server started
	RebuildFold    = "fold"     // folding the log into <data>/projection.new
	RebuildCatchUp = "catch_up" // folding what was appended meanwhile
	RebuildSwap    = "swap"     // projector paused, last events folded, stores swapped
	RebuildDone    = "done"     // the new projection serves
	RebuildFailed  = "failed"   // stopped; the old projection still serves
)

// RebuildStatus is POST and GET /v1/ops/rebuild: where the last (or the
// running) online rebuild is.
type RebuildStatus struct {
	// Running is true from the start of the fold to the end of the swap.
	Running bool `json:"running"`
	// Phase is one of the Rebuild* phases.
	Phase string `json:"phase"`
	// Seq is the sequence folded into the new projection so far; Target
	// the sequence the current pass folds to.
	Seq    uint64 `json:"seq"`
	Target uint64 `json:"target"`
	// Events is the number of events folded so far, and EventsPerSecond
	// their rate since the start.
	Events          uint64  `json:"events"`
	EventsPerSecond float64 `json:"events_per_second"`
	// StartedAt and FinishedAt bound the rebuild (FinishedAt is absent
	// while it runs).
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Error says why a failed rebuild stopped.
	Error string `json:"error,omitempty"`
}

// VerifyResult is POST /v1/ops/verify: the live projection compared with
// a rebuild of the log up to its checkpoint.
type VerifyResult struct {
	OK bool `json:"ok"`
	// Seq is the checkpoint both projections are at.
	Seq uint64 `json:"seq"`
	// Digest is the projection's digest when OK.
	Digest string `json:"digest,omitempty"`
	// TreeRoot is the root hash of the Merkle tree of Seq leaves when OK.
	TreeRoot string `json:"tree_root,omitempty"`
	// Difference is the first difference when not OK.
	Difference *Difference `json:"difference,omitempty"`
	// Message describes the difference for a person.
	Message string `json:"message,omitempty"`
}
