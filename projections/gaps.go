package projections

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
)

// Recording gaps of bridges (contract §14) in the Pebble store:
//
//	'G' space seq(8 B, escaped like a parked event's) → JSON Gap
//
// One record per ledger/gap event, written through the batch's small-record
// overlay (batch_aux.go) and so committed with everything else of the batch,
// in key order; a space's gaps are one prefix scan, oldest first. (The tag
// is in store_keys.go.)

// MaxGapsLimit is the most gaps one Gaps call returns.
const MaxGapsLimit = 1000

// PutGap implements State.
func (b *Batch) PutGap(space string, g *api.Gap) error {
	val, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("projections: batch: encode gap seq %d in space %q: %w", g.Seq, space, err)
	}
	b.touchCoverage(space, g.MEWSpace)
	return b.putAux(tagGap, space, parkedID(g.Seq), val)
}

// Gaps returns up to limit (<= 0 or over MaxGapsLimit: MaxGapsLimit) of
// the recording gaps of space whose sequence is above after, oldest first,
// and the sequence to pass as after for the next page (0 when there is
// none).
func (s *Store) Gaps(space string, after uint64, limit int) ([]api.Gap, uint64, error) {
	if err := s.acquire(); err != nil {
		return nil, 0, err
	}
	defer s.release()
	if limit <= 0 || limit > MaxGapsLimit {
		limit = MaxGapsLimit
	}
	prefix := appendEsc([]byte{tagGap}, space)
	lower := prefix
	if after > 0 {
		if after == ^uint64(0) {
			return []api.Gap{}, 0, nil
		}
		lower = auxKey(tagGap, space, parkedID(after+1))
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, 0, fmt.Errorf("projections: gaps of space %q: %w", space, err)
	}
	out := []api.Gap{}
	var next uint64
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) == limit {
			next = out[len(out)-1].Seq
			break
		}
		var g api.Gap
		if err := json.Unmarshal(it.Value(), &g); err != nil {
			_ = it.Close()
			return nil, 0, fmt.Errorf("projections: gaps of space %q: decode %s: %w", space, DecodeKey(it.Key()), err)
		}
		out = append(out, g)
	}
	if err := it.Close(); err != nil {
		return nil, 0, fmt.Errorf("projections: gaps of space %q: %w", space, err)
	}
	return out, next, nil
}

// What the log says of each bridge (contract §14):
//
//	'B' space fold.BridgeKey(bridge, mew space) → JSON BridgeSession
//
// written through the batch's overlay like a gap.

// BridgeSession implements State.
func (b *Batch) BridgeSession(space, key string) (*api.BridgeSession, error) {
	val, err := b.getAux(tagBridge, space, key)
	if err != nil || val == nil {
		return nil, err
	}
	sl := b.aux[auxID{tagBridge, space, key}]
	if sl.bridge == nil {
		var s api.BridgeSession
		if err := json.Unmarshal(val, &s); err != nil {
			return nil, fmt.Errorf("projections: batch: decode bridge session %q in space %q: %w", key, space, err)
		}
		sl.bridge = &s
	}
	return cloneBridgeSession(sl.bridge), nil
}

// cloneBridgeSession returns a copy of s that shares nothing with it.
func cloneBridgeSession(s *api.BridgeSession) *api.BridgeSession {
	c := *s
	if s.LastReceivedAt != nil {
		t := *s.LastReceivedAt
		c.LastReceivedAt = &t
	}
	if s.LastStoredAt != nil {
		t := *s.LastStoredAt
		c.LastStoredAt = &t
	}
	if s.Run != nil {
		r := *s.Run
		c.Run = &r
	}
	c.OpenGaps = slices.Clone(s.OpenGaps)
	return &c
}

// PutBridgeSession implements State.
// The record is kept as an object (a copy of s) and encoded at Commit.
func (b *Batch) PutBridgeSession(space, key string, s *api.BridgeSession) error {
	if err := b.touchBridge(space, key, s); err != nil {
		return err
	}
	var val []byte
	if s != nil {
		val = []byte{} // present; the bytes are encoded at Commit
	}
	if err := b.putAux(tagBridge, space, key, val); err != nil {
		return err
	}
	sl := b.aux[auxID{tagBridge, space, key}]
	sl.bridge = nil
	if s != nil {
		sl.bridge = cloneBridgeSession(s)
	}
	return nil
}

// BridgeSessions returns what the log says of every bridge of space,
// ordered by bridge and MEW space.
func (s *Store) BridgeSessions(space string) ([]api.BridgeSession, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	prefix := appendEsc([]byte{tagBridge}, space)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: bridges of space %q: %w", space, err)
	}
	out := []api.BridgeSession{}
	for ok := it.First(); ok; ok = it.Next() {
		var bs api.BridgeSession
		if err := json.Unmarshal(it.Value(), &bs); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("projections: bridges of space %q: decode %s: %w", space, DecodeKey(it.Key()), err)
		}
		out = append(out, bs)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: bridges of space %q: %w", space, err)
	}
	return out, nil
}
