package api

import "time"

// Several recorders of one MEW space (contract §14): what each recorded,
// and the holes, the windows in which none was recording. Positions are
// the ledger's stream sequences, never a recorder's clock: a window lies
// between two envelopes the ledger stored, and a recorder recorded a
// window when it saw envelopes on both sides of it in one session with no
// gap of its own between.

// TableRuns is the store table of a recorder's closed runs (see
// RecorderRun).
const TableRuns = "runs"

// RecorderRun is a stretch of the log one session of a recorder (a live
// bridge or a --history follower) recorded without a gap: it saw the
// envelopes stored at Lo and at Hi (stored them, or sent them and was
// answered duplicate) and, having no gap of its own between, everything
// stored between them. It covers the windows between Lo and Hi.
//
// A --history follower's run (History) holds only the positions it was
// answered duplicate: what it stores itself fills what others missed, at
// the log's end, and says nothing of how far it has read.
type RecorderRun struct {
	Session string `json:"session"`
	Lo      uint64 `json:"lo"`
	Hi      uint64 `json:"hi"`
	History bool   `json:"history,omitempty"`
}

// HoleEdge is an envelope stored on one side of a hole: its sequence, id
// and when the ledger stored it (the stream's time).
type HoleEdge struct {
	Seq uint64     `json:"seq"`
	ID  string     `json:"id,omitempty"`
	At  *time.Time `json:"at,omitempty"`
}

// Hole is a window of a MEW space in which no recorder was recording:
// every lifecycle envelope the space carried that the ledger lacks lies
// in a hole. It starts after the envelope After (absent: the start of the
// log) and ends before Before (absent: still open, no recorder has come
// back). Recorders are the recorders in a gap across (part of) it, Gaps
// the ids of those gaps.
type Hole struct {
	MEWSpace  string    `json:"mew_space"`
	After     *HoleEdge `json:"after,omitempty"`
	Before    *HoleEdge `json:"before,omitempty"`
	Open      bool      `json:"open"`
	Recorders []string  `json:"recorders"`
	Gaps      []string  `json:"gaps"`
}

// Holes is the body of GET /v1/holes: the windows of a space's MEW
// spaces in which no recorder was recording, ordered by MEW space and
// position, and what the ledger knows of each recorder (contract §14
// "Several recorders").
type Holes struct {
	Holes     []Hole          `json:"holes"`
	Recorders []BridgeSession `json:"recorders"`
}
