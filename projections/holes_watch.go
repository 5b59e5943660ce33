package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/fold"
)

// The hole watch (contract §14 "Several recorders", §7 /v1/watch): the
// fold's record of when each MEW space's holes opened and healed.
//
//	'U' space mew space           → JSON []api.Hole: the MEW space's holes as of its last hole change
//	'W' space seq(8 B)+mew space  → JSON api.HoleChange: the hole change index
//
// Both are small records of the batch's overlay (batch_aux.go), committed
// with everything else. An arrival (one Apply, with the orphans it
// releases) that puts a gap, a recorder's closed runs, or a bridge record
// whose current run appears, goes or moves its start, touches its MEW
// space; when the arrival ends (the next arrival's RecordEvent, or the
// batch's Handoff or Commit) the batch works out each touched MEW space's
// holes through the overlay (fold.Cover over every gap and recorder of
// the space, what Store.Coverage computes when read), compares the
// positions they hold with the 'U' record, and, when they differ, writes
// the new 'U' record and a 'W' entry keyed by the arrival's sequence. The
// holes after an arrival are a function of the log up to it, whatever the
// batch sizes, so a rebuild writes the same entries.

// mewKey is a MEW space of a ledger space.
type mewKey struct{ space, mew string }

// runMark is what of a bridge record's current run the holes depend on:
// a current run covers everything after its start.
type runMark struct {
	has bool
	lo  uint64
}

func runMarkOf(s *api.BridgeSession) runMark {
	if s == nil || s.Run == nil {
		return runMark{}
	}
	return runMark{true, s.Run.Lo}
}

// mewOfKey returns the MEW space of a recorder key (fold.BridgeKey).
func mewOfKey(key string) string {
	_, mew, _ := strings.Cut(key, "\x00")
	return mew
}

// touchCoverage notes that the current arrival changed what the holes of
// (space, mew) are computed from.
func (b *Batch) touchCoverage(space, mew string) {
	if b.noHoles {
		return
	}
	if b.coverTouched == nil {
		b.coverTouched = map[mewKey]struct{}{}
	}
	b.coverTouched[mewKey{space, mew}] = struct{}{}
}

// touchBridge is PutBridgeSession's note: a bridge record whose current
// run appears, goes or moves its start touches its MEW space.
func (b *Batch) touchBridge(space, key string, s *api.BridgeSession) error {
	if b.noHoles {
		return nil
	}
	k := auxID{tagBridge, space, key}
	old, ok := b.runMarks[k]
	if !ok {
		prev, err := b.BridgeSession(space, key)
		if err != nil {
			return err
		}
		old = runMarkOf(prev)
		if b.runMarks == nil {
			b.runMarks = map[auxID]runMark{}
		}
	}
	cur := runMarkOf(s)
	b.runMarks[k] = cur
	if cur != old {
		b.touchCoverage(space, s.MEWSpace)
	}
	return nil
}

var _ fold.CoverageSkipper = (*Batch)(nil)

// SkipCoverage implements fold.CoverageSkipper: a fold without coverage
// (fold.Folder.WithoutCoverage, a benchmark's baseline) writes through
// b, so b works out no hole changes either. The projection so folded
// serves no holes and no hole changes.
func (b *Batch) SkipCoverage() { b.noHoles = true }

// endArrival works out the holes of the MEW spaces the arrival at seq
// touched, in key order, and notes their changes.
func (b *Batch) endArrival(seq uint64) error {
	if len(b.coverTouched) == 0 {
		return nil
	}
	keys := make([]mewKey, 0, len(b.coverTouched))
	for k := range b.coverTouched {
		keys = append(keys, k)
	}
	clear(b.coverTouched)
	slices.SortFunc(keys, func(x, y mewKey) int {
		if c := strings.Compare(x.space, y.space); c != 0 {
			return c
		}
		return strings.Compare(x.mew, y.mew)
	})
	for _, k := range keys {
		if err := b.noteHoles(k.space, k.mew, seq); err != nil {
			return err
		}
	}
	return nil
}

// auxIDs returns the ids of the small records (tag, space) the overlay,
// the pending batch or Pebble hold, sorted (some may read as absent).
func (b *Batch) auxIDs(tag byte, space string) ([]string, error) {
	set := map[string]struct{}{}
	// The pending batch first: it leaves pending only after its writes
	// are in Pebble, so what it wrote is in one or the other.
	b.fromPending(func(p *Batch) bool {
		found := false
		for k, sl := range p.aux {
			if k.tag == tag && k.space == space && sl.dirty {
				set[k.id] = struct{}{}
				found = true
			}
		}
		return found
	})
	for k := range b.aux {
		if k.tag == tag && k.space == space {
			set[k.id] = struct{}{}
		}
	}
	prefix := appendEsc([]byte{tag}, space)
	err := b.read(func(r pebble.Reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			id, rest, err := readEsc(it.Key()[len(prefix):])
			if err != nil || len(rest) != 0 {
				_ = it.Close()
				return fmt.Errorf("%w: %q", errBadKey, bytes.Clone(it.Key()))
			}
			set[id] = struct{}{}
		}
		return it.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: list %c records of space %q: %w", tag, space, err)
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// holesNow works out the holes of (space, mew) through the overlay.
func (b *Batch) holesNow(space, mew string) ([]api.Hole, error) {
	ids, err := b.auxIDs(tagGap, space)
	if err != nil {
		return nil, err
	}
	var gaps []api.Gap
	for _, id := range ids {
		val, err := b.getAux(tagGap, space, id)
		if err != nil {
			return nil, err
		}
		if val == nil {
			continue
		}
		var g api.Gap
		if err := json.Unmarshal(val, &g); err != nil {
			return nil, fmt.Errorf("projections: batch: decode gap %x in space %q: %w", id, space, err)
		}
		if g.MEWSpace == mew {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) == 0 {
		return nil, nil
	}
	keys, err := b.auxIDs(tagBridge, space)
	if err != nil {
		return nil, err
	}
	var recs []fold.Recorder
	for _, key := range keys {
		if mewOfKey(key) != mew {
			continue
		}
		s, err := b.BridgeSession(space, key)
		if err != nil {
			return nil, err
		}
		if s == nil {
			continue
		}
		runs, err := b.RecorderRuns(space, key)
		if err != nil {
			return nil, err
		}
		recs = append(recs, fold.Recorder{Record: *s, Runs: runs})
	}
	return fold.Cover(gaps, recs), nil
}

// noteHoles compares the holes of (space, mew) now with its 'U' record
// and, when the positions in a hole differ, writes both records.
func (b *Batch) noteHoles(space, mew string, seq uint64) error {
	now, err := b.holesNow(space, mew)
	if err != nil {
		return err
	}
	var before []api.Hole
	val, err := b.getAux(tagHoles, space, mew)
	if err != nil {
		return err
	}
	if val != nil {
		if err := json.Unmarshal(val, &before); err != nil {
			return fmt.Errorf("projections: batch: decode holes of %q in space %q: %w", mew, space, err)
		}
	}
	opened, healed := diffHoles(before, now)
	if len(opened) == 0 && len(healed) == 0 {
		return nil
	}
	if now == nil {
		now = []api.Hole{}
	}
	if len(now) == 0 {
		err = b.putAux(tagHoles, space, mew, nil)
	} else if val, err = json.Marshal(now); err == nil {
		err = b.putAux(tagHoles, space, mew, val)
	}
	if err != nil {
		return fmt.Errorf("projections: batch: holes of %q in space %q: %w", mew, space, err)
	}
	ch := api.HoleChange{Seq: seq, Space: space, MEWSpace: mew, Opened: opened, Healed: healed, Holes: now}
	if val, err = json.Marshal(&ch); err != nil {
		return fmt.Errorf("projections: batch: encode hole change of %q in space %q: %w", mew, space, err)
	}
	return b.putAux(tagHoleChange, space, parkedID(seq)+mew, val)
}

// holeSpan is a hole's window as a range of cracks [lo, hi), hi
// math.MaxUint64 while open (fold/holes.go).
func holeSpan(h *api.Hole) (lo, hi uint64) {
	lo, hi = 0, math.MaxUint64
	if h.After != nil {
		lo = h.After.Seq
	}
	if h.Before != nil {
		hi = h.Before.Seq
	}
	return lo, hi
}

// diffHoles returns the parts of the holes of now in no hole of before
// (opened) and those of before in no hole of now (healed), each with the
// recorders and gaps of the hole it is part of. Holes of one MEW space
// are disjoint and sorted (fold.Cover).
func diffHoles(before, now []api.Hole) (opened, healed []api.Hole) {
	return minusHoles(now, before), minusHoles(before, now)
}

func minusHoles(a, b []api.Hole) []api.Hole {
	out := []api.Hole{}
	for i := range a {
		lo, hi := holeSpan(&a[i])
		for j := range b {
			blo, bhi := holeSpan(&b[j])
			if bhi <= lo || blo >= hi {
				continue
			}
			if blo > lo {
				out = append(out, holePart(&a[i], lo, blo))
			}
			lo = bhi
			if lo >= hi {
				break
			}
		}
		if lo < hi {
			out = append(out, holePart(&a[i], lo, hi))
		}
	}
	return out
}

// holePart is the part [lo, hi) of h.
func holePart(h *api.Hole, lo, hi uint64) api.Hole {
	p := api.Hole{MEWSpace: h.MEWSpace, Open: hi == math.MaxUint64, Recorders: h.Recorders, Gaps: h.Gaps}
	if lo > 0 {
		p.After = &api.HoleEdge{Seq: lo}
	}
	if hi != math.MaxUint64 {
		p.Before = &api.HoleEdge{Seq: hi}
	}
	return p
}

// HoleChanges returns the hole changes of space with a sequence in
// (after, through], in stream order (then MEW space), the envelopes on
// either side of each window named (their ids and times, as in Coverage).
func (s *Store) HoleChanges(space string, after, through uint64) ([]api.HoleChange, error) {
	if after >= through {
		return nil, nil
	}
	out, err := s.holeChanges(space, after, through)
	if err != nil {
		return nil, err
	}
	for i := range out {
		for _, hs := range [][]api.Hole{out[i].Opened, out[i].Healed, out[i].Holes} {
			s.nameEdges(hs)
		}
	}
	return out, nil
}

func (s *Store) holeChanges(space string, after, through uint64) ([]api.HoleChange, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	prefix := appendEsc([]byte{tagHoleChange}, space)
	lower := appendEsc(bytes.Clone(prefix), parkedID(after+1))
	lower = lower[:len(lower)-2] // the sequence, not terminated: the MEW space follows
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: hole changes of space %q: %w", space, err)
	}
	var out []api.HoleChange
	for ok := it.First(); ok; ok = it.Next() {
		id, rest, err := readEsc(it.Key()[len(prefix):])
		if err != nil || len(rest) != 0 || len(id) < 8 {
			_ = it.Close()
			return nil, fmt.Errorf("projections: hole changes of space %q: %w: %q", space, errBadKey, bytes.Clone(it.Key()))
		}
		if binary.BigEndian.Uint64([]byte(id[:8])) > through {
			break
		}
		var c api.HoleChange
		if err := json.Unmarshal(it.Value(), &c); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("projections: hole changes of space %q: decode %s: %w", space, DecodeKey(it.Key()), err)
		}
		out = append(out, c)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: hole changes of space %q: %w", space, err)
	}
	return out, nil
}

// nameEdges fills in the id and time of the envelopes on either side of
// each hole (edges that share a pointer are filled once).
func (s *Store) nameEdges(hs []api.Hole) {
	for i := range hs {
		for _, e := range []*api.HoleEdge{hs[i].After, hs[i].Before} {
			if e == nil || e.ID != "" {
				continue
			}
			if r, err := s.Event(e.Seq); err == nil && r != nil {
				e.ID = r.ID
				at := r.At.UTC()
				e.At = &at
			}
		}
	}
}
