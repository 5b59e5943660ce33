package projections

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/fold"
)

// Several recorders of one MEW space (contract §14; the fold's side is
// fold/holes.go):
//
//	'R' space fold.BridgeKey(bridge, mew space) → JSON []RecorderRun: the recorder's closed runs
//
// written through the batch's overlay like a gap, at a run's end only (a
// gap, a new session), never per envelope.

// Gap implements State.
func (b *Batch) Gap(space string, seq uint64) (*api.Gap, error) {
	val, err := b.getAux(tagGap, space, parkedID(seq))
	if err != nil || val == nil {
		return nil, err
	}
	var g api.Gap
	if err := json.Unmarshal(val, &g); err != nil {
		return nil, fmt.Errorf("projections: batch: decode gap seq %d in space %q: %w", seq, space, err)
	}
	return &g, nil
}

// RecorderRuns implements State.
func (b *Batch) RecorderRuns(space, key string) ([]api.RecorderRun, error) {
	val, err := b.getAux(tagRuns, space, key)
	if err != nil || val == nil {
		return nil, err
	}
	var runs []api.RecorderRun
	if err := json.Unmarshal(val, &runs); err != nil {
		return nil, fmt.Errorf("projections: batch: decode runs of %q in space %q: %w", key, space, err)
	}
	return runs, nil
}

// PutRecorderRuns implements State.
func (b *Batch) PutRecorderRuns(space, key string, runs []api.RecorderRun) error {
	b.touchCoverage(space, mewOfKey(key))
	if len(runs) == 0 {
		return b.putAux(tagRuns, space, key, nil)
	}
	val, err := json.Marshal(runs)
	if err != nil {
		return fmt.Errorf("projections: batch: encode runs of %q in space %q: %w", key, space, err)
	}
	return b.putAux(tagRuns, space, key, val)
}

// Recorders returns every recorder of space (ordered by bridge and MEW
// space) with its closed runs.
func (s *Store) Recorders(space string) ([]fold.Recorder, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	var out []fold.Recorder
	prefix := appendEsc([]byte{tagBridge}, space)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: recorders of space %q: %w", space, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		var r fold.Recorder
		if err := json.Unmarshal(it.Value(), &r.Record); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("projections: recorders of space %q: decode %s: %w", space, DecodeKey(it.Key()), err)
		}
		out = append(out, r)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: recorders of space %q: %w", space, err)
	}
	for i := range out {
		val, closer, err := s.db.Get(auxKey(tagRuns, space, fold.BridgeKey(out[i].Record.Bridge, out[i].Record.MEWSpace)))
		if err == pebble.ErrNotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("projections: runs of space %q: %w", space, err)
		}
		err = json.Unmarshal(val, &out[i].Runs)
		_ = closer.Close()
		if err != nil {
			return nil, fmt.Errorf("projections: runs of %q in space %q: %w", out[i].Record.Bridge, space, err)
		}
	}
	return out, nil
}

// Coverage is a space's recording as the ledger knows it (contract §14
// "Several recorders"): every gap, marked covered or not, and the holes.
type Coverage struct {
	Gaps  []api.Gap
	Holes []api.Hole
}

// Coverage works out which gaps of space other recorders covered and the
// space's holes (of one MEW space when mewSpace is not nil), with the
// envelopes on either side of each hole.
func (s *Store) Coverage(space string, mewSpace *string) (*Coverage, error) {
	var gaps []api.Gap
	for after := uint64(0); ; {
		page, next, err := s.Gaps(space, after, 0)
		if err != nil {
			return nil, err
		}
		gaps = append(gaps, page...)
		if next == 0 {
			break
		}
		after = next
	}
	recs, err := s.Recorders(space)
	if err != nil {
		return nil, err
	}
	holes := fold.Cover(gaps, recs)
	c := &Coverage{Gaps: []api.Gap{}, Holes: []api.Hole{}}
	for _, g := range gaps {
		if mewSpace == nil || g.MEWSpace == *mewSpace {
			c.Gaps = append(c.Gaps, g)
		}
	}
	for _, h := range holes {
		if mewSpace != nil && h.MEWSpace != *mewSpace {
			continue
		}
		for _, e := range []*api.HoleEdge{h.After, h.Before} {
			if e == nil {
				continue
			}
			if r, err := s.Event(e.Seq); err == nil && r != nil {
				e.ID = r.ID
				at := r.At.UTC()
				e.At = &at
			}
		}
		c.Holes = append(c.Holes, h)
	}
	return c, nil
}

// RecordingCounts returns the number of holes of space and of its gaps
// other recorders covered.
func (s *Store) RecordingCounts(space string) (holes, covered int64, err error) {
	c, err := s.Coverage(space, nil)
	if err != nil {
		return 0, 0, err
	}
	for _, g := range c.Gaps {
		if g.Covered {
			covered++
		}
	}
	return int64(len(c.Holes)), covered, nil
}
