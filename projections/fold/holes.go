package fold

import (
	"math"
	"slices"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// Several recorders of one MEW space (contract §14): the fold keeps, per
// recorder (a live bridge or a --history follower, keyed by BridgeKey),
// the runs of the log each of its sessions recorded, and, per gap, where
// its window ends. From them Cover works out, when read, which gaps other
// recorders covered and the holes, the windows no recorder recorded.
//
// Everything is in log positions (stream sequences), never in a
// recorder's clock, so that machines whose clocks differ agree: a window
// lies between two stored messages, and a message the space carried that
// the ledger lacks has no position but lies between the last envelope a
// recorder saw before losing the space and the first it stored after.
//
//   - A gap's window runs from its LastSeq (the last envelope its
//     recorder saw; the gap event's own position if it names a later
//     one) to EndSeq, the first envelope the ledger stores from the
//     recorder after the gap event (open until then).
//   - A run is a stretch one session of a recorder saw without a gap: it
//     starts at the first envelope the session stored (or, when its mark
//     says so, the envelope it saw just before: BridgeMark.Prev, which
//     is ignored on the first store after a gap of the same session),
//     grows with every envelope it stores, and ends at the recorder's next
//     gap, cut back to that gap's LastSeq when the session's evidence ran
//     past it (a batch stored while the connection was already lost), or
//     dropped when the gap starts before it. A session that changes
//     closes the run. A run that saw one position only covers nothing and
//     is not kept.
//   - A window is covered when runs of other recorders (or of other
//     sessions of the same one) cover every position between its two
//     sides: each of those recorders saw envelopes on both sides of each
//     stretch, in one session, with no gap of its own. A window still
//     open is never covered.
//   - The holes are the positions inside some gap that no run covers,
//     where the current run of a recorder whose latest news is an
//     envelope (no gap since) counts as covering everything after its
//     start: a crashed recorder's gap is on the record only once it comes
//     back, and a hole appears then. So a hole is never smaller than the
//     intersection of the recorders' gaps, and every envelope the space
//     carried that no recorder stored lies in one.
//
// A crack c is the place between positions c and c+1; intervals below
// are half-open ranges of cracks, [lo, hi), hi = inf for open ones.

const inf = math.MaxUint64

// recorderStored extends the run of the recorder key (record r, being
// updated) with the envelope stored at seq under mark m, ends the windows
// of its open gaps there, and counts its duplicates. prevLast is the last
// position stored from the recorder before; newSession: r's previous
// session was not m's.
func (a *applier) recorderStored(space, key string, r *api.BridgeSession, prevLast uint64, newSession bool, m ledger.BridgeMark, seq uint64) error {
	if a.noCoverage {
		return nil
	}
	if newSession {
		r.SessionDuplicates = 0
	}
	if m.Dups > r.SessionDuplicates {
		r.Duplicates += m.Dups - r.SessionDuplicates
		r.SessionDuplicates = m.Dups
	}
	prevOK := m.Prev > 0 && m.Prev < seq
	if len(r.OpenGaps) > 0 {
		for _, gs := range r.OpenGaps {
			g, err := a.st.Gap(space, gs)
			if err != nil {
				return err
			}
			if g == nil {
				continue
			}
			if g.Session == m.Session || g.Session == "" {
				prevOK = false // what the session saw before its gap
			}
			ng := *g
			ng.EndSeq, ng.EndEnvelope = seq, r.LastEnvelope
			if err := a.st.PutGap(space, &ng); err != nil {
				return err
			}
		}
		r.OpenGaps = nil
	}
	if m.History && m.Prev == prevLast {
		prevOK = false // its own fill: says nothing of how far it read
	}
	if r.Run != nil && r.Run.Session != m.Session {
		if err := a.closeRun(space, key, *r.Run); err != nil {
			return err
		}
		r.Run = nil
	}
	lo, hi, has := seq, seq, !m.History
	if prevOK {
		if has {
			lo = min(lo, m.Prev)
		} else {
			lo, hi, has = m.Prev, m.Prev, true
		}
	}
	if !has {
		return nil
	}
	if run := r.Run; run != nil {
		nr := *run
		nr.Lo, nr.Hi = min(nr.Lo, lo), max(nr.Hi, hi)
		r.Run = &nr
		return nil
	}
	r.Run = &api.RecorderRun{Session: m.Session, Lo: lo, Hi: hi, History: m.History}
	return nil
}

// recorderGap ends the run a gap of the recorder key (record r, being
// updated) stops, cut back to the gap's start, and opens its window.
func (a *applier) recorderGap(space, key string, r *api.BridgeSession, g *ledger.Gap, rec *api.Gap) error {
	if a.noCoverage {
		return nil
	}
	seq := rec.Seq
	last := min(g.LastSeq, seq)
	start := last
	rec.StartSeq = &start
	if r.History {
		// A follower: the last envelope it was answered places it,
		// unless it stored that one itself; else its run's end; else
		// nothing does, and its window starts at the log's start.
		start = 0
		if last != r.LastSeq {
			start = last
		}
	}
	if run := r.Run; run != nil && (g.Session == "" || run.Session == g.Session) {
		r.Run = nil
		if run.History {
			nr := *run
			nr.Hi = max(nr.Hi, start)
			start = nr.Hi
			return a.openGap(space, key, r, seq, nr)
		}
		if last >= run.Lo {
			nr := *run
			nr.Hi = min(nr.Hi, last)
			if err := a.closeRun(space, key, nr); err != nil {
				return err
			}
		}
	} else if g.Session != "" {
		// A gap of an earlier session: cut its closed runs.
		runs, err := a.st.RecorderRuns(space, key)
		if err != nil {
			return err
		}
		var out []api.RecorderRun
		changed := false
		for _, x := range runs {
			if x.Session == g.Session && x.Hi > last {
				changed = true
				if last <= x.Lo {
					continue
				}
				x.Hi = last
			}
			out = append(out, x)
		}
		if changed {
			if err := a.st.PutRecorderRuns(space, key, out); err != nil {
				return err
			}
		}
	}
	r.OpenGaps = append(slices.Clone(r.OpenGaps), seq)
	return nil
}

// openGap closes run and opens the window of the gap at seq.
func (a *applier) openGap(space, key string, r *api.BridgeSession, seq uint64, run api.RecorderRun) error {
	if err := a.closeRun(space, key, run); err != nil {
		return err
	}
	r.OpenGaps = append(slices.Clone(r.OpenGaps), seq)
	return nil
}

// closeRun keeps a run that covers something.
func (a *applier) closeRun(space, key string, run api.RecorderRun) error {
	if run.Hi <= run.Lo {
		return nil
	}
	runs, err := a.st.RecorderRuns(space, key)
	if err != nil {
		return err
	}
	return a.st.PutRecorderRuns(space, key, append(slices.Clone(runs), run))
}

// Recorder is what the fold keeps of one recorder of a space: its record
// and its closed runs.
type Recorder struct {
	Record api.BridgeSession
	Runs   []api.RecorderRun
}

// Cover works out, from a space's gaps (oldest first) and recorders,
// which gaps are covered (it sets Covered and CoveredBy on gaps, in
// place) and the holes of each MEW space, ordered by MEW space then
// position. Holes' edges carry sequences only (IDs and times are the
// caller's to fill in). It is a pure function of its input.
func Cover(gaps []api.Gap, recs []Recorder) []api.Hole {
	type run struct {
		lo, hi          uint64
		bridge, session string
		tentative       bool // the current run: covers to inf for holes
	}
	byMEW := map[string][]run{}
	for _, rc := range recs {
		rec := rc.Record
		for _, x := range rc.Runs {
			byMEW[rec.MEWSpace] = append(byMEW[rec.MEWSpace], run{x.Lo, x.Hi, rec.Bridge, x.Session, false})
		}
		if x := rec.Run; x != nil {
			byMEW[rec.MEWSpace] = append(byMEW[rec.MEWSpace], run{x.Lo, x.Hi, rec.Bridge, x.Session, true})
		}
	}
	for _, rs := range byMEW {
		slices.SortFunc(rs, func(a, b run) int {
			if a.lo != b.lo {
				return cmpUint(a.lo, b.lo)
			}
			return cmpUint(a.hi, b.hi)
		})
	}
	// Which gaps are covered.
	for i := range gaps {
		g := &gaps[i]
		g.Covered, g.CoveredBy = false, nil
		s, e := window(g)
		if e == inf {
			continue
		}
		at := s // everything before at is covered
		var by []string
		for _, x := range byMEW[g.MEWSpace] {
			if x.bridge == g.Bridge && x.session == g.Session || x.hi <= x.lo {
				continue
			}
			if x.lo > at {
				break
			}
			if x.hi > at {
				at = x.hi
			}
			if x.hi > s && x.lo < e && !slices.Contains(by, x.bridge) {
				by = append(by, x.bridge)
			}
			if at >= e {
				break
			}
		}
		if at >= e {
			slices.Sort(by)
			g.Covered, g.CoveredBy = true, by
		}
	}
	// The holes: gap windows minus every run (the current ones to inf).
	spaces := map[string]bool{}
	for _, g := range gaps {
		spaces[g.MEWSpace] = true
	}
	var out []api.Hole
	for _, ms := range sortedKeys(spaces) {
		var gw, cover []iv
		for i := range gaps {
			if gaps[i].MEWSpace == ms {
				s, e := window(&gaps[i])
				gw = append(gw, iv{s, e})
			}
		}
		for _, x := range byMEW[ms] {
			hi := x.hi
			if x.tentative {
				hi = inf
			}
			if hi > x.lo {
				cover = append(cover, iv{x.lo, hi})
			}
		}
		for _, h := range subtract(merge(gw), merge(cover)) {
			hole := api.Hole{MEWSpace: ms, Recorders: []string{}, Gaps: []string{}, Open: h.hi == inf}
			if h.lo > 0 {
				hole.After = &api.HoleEdge{Seq: h.lo}
			}
			if h.hi != inf {
				hole.Before = &api.HoleEdge{Seq: h.hi}
			}
			for i := range gaps {
				g := &gaps[i]
				if g.MEWSpace != ms {
					continue
				}
				if s, e := window(g); s < h.hi && e > h.lo {
					hole.Gaps = append(hole.Gaps, g.ID)
					if !slices.Contains(hole.Recorders, g.Bridge) {
						hole.Recorders = append(hole.Recorders, g.Bridge)
					}
				}
			}
			slices.Sort(hole.Recorders)
			out = append(out, hole)
		}
	}
	return out
}

// window is a gap's window as a range of cracks: from its LastSeq (the
// gap event's position if it names a later one) to its EndSeq (inf while
// open).
func window(g *api.Gap) (lo, hi uint64) {
	lo, hi = min(g.LastSeq, g.Seq), inf
	if g.StartSeq != nil {
		lo = min(lo, *g.StartSeq)
	}
	if g.EndSeq > lo {
		hi = g.EndSeq
	}
	return lo, hi
}

// iv is a half-open range of cracks.
type iv struct{ lo, hi uint64 }

// merge returns the union of ivs as sorted, disjoint, non-touching ranges.
func merge(ivs []iv) []iv {
	slices.SortFunc(ivs, func(a, b iv) int { return cmpUint(a.lo, b.lo) })
	var out []iv
	for _, x := range ivs {
		if x.hi <= x.lo {
			continue
		}
		if n := len(out); n > 0 && x.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// subtract returns a minus b, both merged.
func subtract(a, b []iv) []iv {
	var out []iv
	j := 0
	for _, x := range a {
		lo := x.lo
		for j < len(b) && b[j].hi <= lo {
			j++
		}
		for k := j; k < len(b) && b[k].lo < x.hi; k++ {
			if b[k].lo > lo {
				out = append(out, iv{lo, b[k].lo})
			}
			lo = max(lo, b[k].hi)
		}
		if lo < x.hi {
			out = append(out, iv{lo, x.hi})
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
