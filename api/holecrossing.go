package api

// HoleCrossing says that a proposal's lifecycle crosses recording holes
// (contract §14 "Several recorders"): an envelope of it that the space
// carried then (a fulfilment, a response, a rejection, a withdrawal) may
// be missing from the ledger.
//
// The lifecycle runs in log positions from FirstSeq, the smallest
// sequence of the proposal's events (its creation, or an event filed
// under it before it arrived), to LastSeq, the largest; while the
// proposal is pending (Open) it runs on to the log's end, as its decision
// may yet come or have been lost. A hole's window lies strictly between
// the envelope stored before it (After; the log's start when absent) and
// the one stored after it (Before; the log's end while the hole is open).
// The lifecycle crosses the hole when the two overlap:
//
//	after < last (∞ while pending)  and  first < before (∞ while open)
//
// So a proposal decided before a hole, or created after it, crosses
// nothing. Every MEW space recorded into the proposal's ledger space is
// considered. It is worked out when the proposal is read, from the holes
// the log gives at the point read (live, or as of a past point), never
// stored with the proposal: a rebuild gives the same answer.
type HoleCrossing struct {
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Open     bool   `json:"open"`
	Holes    []Hole `json:"holes"`
}

// CrossedHoles returns the holes among hs that a lifecycle from first to
// last (to the log's end when open) crosses, in the order of hs.
func CrossedHoles(first, last uint64, open bool, hs []Hole) []Hole {
	var out []Hole
	for _, h := range hs {
		var after uint64
		if h.After != nil {
			after = h.After.Seq
		}
		if !open && after >= last {
			continue
		}
		if !h.Open && h.Before != nil && h.Before.Seq <= first {
			continue
		}
		out = append(out, h)
	}
	return out
}
