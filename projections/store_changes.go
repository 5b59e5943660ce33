package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
)

// The change index (contract §7 /v1/watch).
//
// Whenever the fold puts a proposal whose state or anomalies differ from
// what it was, the batch notes a [Change] keyed by the sequence of the
// arriving event whose fold made it (the proposal's UpdatedSeq), and
// Commit writes it in the same Pebble batch as the proposal and the
// checkpoint:
//
//	'C' seq(8, big-endian) esc(space) esc(id) → Change (binary, encode_bin.go)
//
// One arrival may change one proposal several times (a proposal that
// releases its orphaned fulfilment): the index keeps one change per
// (seq, space, id), from the state before the arrival to the state after
// it. Every arrival is folded whole inside one batch, so the index is a
// pure function of the log and a rebuild writes the same keys as the live
// projector, whatever its batch sizes. Sequences of later commits are
// higher, so a reader that has seen every change up to the checkpoint of
// one commit resumes after that sequence and misses nothing. (The tag is
// in store_keys.go.)

type changeID struct {
	seq       uint64
	space, id string
}

func readChangeKey(k []byte) (seq uint64, space, id string, err error) {
	if len(k) < 9 || k[0] != tagChange {
		return 0, "", "", fmt.Errorf("projections: not a change key: %q", k)
	}
	seq = binary.BigEndian.Uint64(k[1:9])
	space, r, err := readEsc(k[9:])
	if err != nil {
		return 0, "", "", err
	}
	id, r, err = readEsc(r)
	if err != nil {
		return 0, "", "", err
	}
	if len(r) != 0 {
		return 0, "", "", fmt.Errorf("projections: trailing bytes in change key %q", k)
	}
	return seq, space, id, nil
}

// noteChange is called by PutProposal before p replaces old (nil: p is
// new): it records a change when the state or the anomalies differ.
func (b *Batch) noteChange(old, p *api.Proposal) {
	var prev api.ProposalState
	var prevAn []string
	if old != nil {
		prev, prevAn = old.State, old.Anomalies
	}
	k := changeID{p.UpdatedSeq, p.Space, p.ID}
	c, ok := b.changes[k]
	if !ok {
		if old != nil && old.State == p.State && slices.Equal(old.Anomalies, p.Anomalies) {
			return
		}
		if b.changes == nil {
			b.changes = map[changeID]*api.Change{}
		}
		c = &api.Change{Seq: p.UpdatedSeq, Space: p.Space, ID: p.ID, PrevState: prev}
		b.changes[k] = c
	} else {
		// Several changes at one arrival: keep the state before the first.
		prevAn = nil
		for _, a := range c.Anomalies {
			if !slices.Contains(c.Added, a) {
				prevAn = append(prevAn, a)
			}
		}
	}
	c.State, c.At = p.State, p.UpdatedAt
	c.Event, c.DecidedBy = "", ""
	switch {
	case p.State != c.PrevState && p.State != api.StatePending:
		c.Event, c.DecidedBy = p.DecidedEvent, p.DecidedBy
	case c.PrevState == "":
		c.Event = p.ID
	}
	c.Anomalies = slices.Clone(p.Anomalies)
	if c.Anomalies == nil {
		c.Anomalies = []string{}
	}
	c.Added = nil
	for _, a := range p.Anomalies {
		if !slices.Contains(prevAn, a) {
			c.Added = append(c.Added, a)
		}
	}
}

// appendMarshalChange appends json.Marshal(c) to b (encode.go's writer,
// json.Marshal for what it leaves to it).
func appendMarshalChange(b []byte, c *api.Change) ([]byte, error) {
	w := newWriter(b)
	w.u64("seq", c.Seq)
	w.str("space", c.Space)
	w.str("id", c.ID)
	w.str("state", string(c.State))
	w.strOmit("prev_state", string(c.PrevState))
	w.strings("anomalies", c.Anomalies)
	w.stringsOmit("added", c.Added)
	w.strOmit("event", c.Event)
	w.strOmit("decided_by", c.DecidedBy)
	w.time("at", c.At)
	if out, ok := w.end(); ok {
		return out, nil
	}
	v, err := json.Marshal(c)
	return append(b, v...), err
}

// collectChanges appends the change index writes of the batch to ops.
func (b *Batch) collectChanges(c *commitBuf, ops []kv) ([]kv, error) {
	for k, ch := range b.changes {
		ks := len(c.a.b)
		c.a.b = appendEsc(appendEsc(appendU64(append(c.a.b, tagChange), k.seq), k.space), k.id)
		vs := len(c.a.b)
		c.a.b = appendChangeBin(c.a.b, ch)
		ops = append(ops, kv{key: c.a.b[ks:vs:vs], val: c.a.take(vs)})
	}
	return ops, nil
}

// Changes returns the changes with a sequence above after, in stream order
// (then space, then id), read from one consistent view. keep, when not nil,
// selects the changes returned. It reads whole sequences only, and stops
// after the sequence at which it has returned limit changes or looked at
// scan keys (limit and scan ≤ 0: no bound): through is the last sequence
// it has read completely, the after of the next call. When the view had no
// more, through is its checkpoint (and more is false).
func (s *Store) Changes(after uint64, limit, scan int, keep func(*api.Change) bool) (out []api.Change, through uint64, more bool, err error) {
	if err := s.acquire(); err != nil {
		return nil, 0, false, err
	}
	defer s.release()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	var applied uint64
	if v, closer, err := snap.Get(checkpointKey); err == nil {
		applied = binary.BigEndian.Uint64(v)
		_ = closer.Close()
	} else if err != pebble.ErrNotFound {
		return nil, 0, false, fmt.Errorf("projections: changes: %w", err)
	}
	if after >= applied {
		return nil, max(after, applied), false, nil
	}
	lower := appendU64([]byte{tagChange}, after+1)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{tagChange + 1}})
	if err != nil {
		return nil, 0, false, fmt.Errorf("projections: changes: %w", err)
	}
	defer it.Close()
	scanned, last := 0, after
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 9 {
			return nil, 0, false, fmt.Errorf("projections: change key %q too short", bytes.Clone(k))
		}
		seq := binary.BigEndian.Uint64(k[1:9])
		if seq != last && last != after && ((limit > 0 && len(out) >= limit) || (scan > 0 && scanned >= scan)) {
			return out, last, true, nil
		}
		last = seq
		scanned++
		var c api.Change
		_, space, id, err := readChangeKey(k)
		if err == nil {
			err = decodeChange(seq, space, id, it.Value(), &c)
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("projections: change %q: %w", bytes.Clone(k), err)
		}
		if keep == nil || keep(&c) {
			out = append(out, c)
		}
	}
	if err := it.Error(); err != nil {
		return nil, 0, false, fmt.Errorf("projections: changes: %w", err)
	}
	return out, applied, false, nil
}
