package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/fold"
)

// Compare walks two stores in key order (the order of Dump), each on a
// consistent snapshot, and returns nil when they hold the same keys and
// values, or the first difference.
//
// The checkpoint is compared last: a store folded one event further than
// the other reports the first record that event changed (naming its
// proposal), not merely that the checkpoints differ. Two stores that hold
// the same records at different checkpoints (an event that changed
// nothing is impossible: every event writes a history entry and counts
// in stats) report the checkpoint. Errors are storage errors.
func Compare(a, b *Store) (*api.Difference, error) {
	if a == b {
		return nil, nil
	}
	xa, err := a.rawIter()
	if err != nil {
		return nil, fmt.Errorf("projections: compare: store a: %w", err)
	}
	defer xa.close()
	xb, err := b.rawIter()
	if err != nil {
		return nil, fmt.Errorf("projections: compare: store b: %w", err)
	}
	defer xb.close()

	d := &api.Difference{}
	var ca, cb []byte
	for xa.valid || xb.valid {
		var c int
		switch {
		case !xa.valid:
			c = 1
		case !xb.valid:
			c = -1
		default:
			c = bytes.Compare(xa.key(), xb.key())
		}
		if c <= 0 && bytes.Equal(xa.key(), checkpointKey) {
			ca = bytes.Clone(xa.value())
			xa.next()
			continue
		}
		if c >= 0 && bytes.Equal(xb.key(), checkpointKey) {
			cb = bytes.Clone(xb.value())
			xb.next()
			continue
		}
		switch {
		case c < 0:
			d.Key, d.Kind, d.A = DecodeKey(xa.key()), api.MissingInB, bytes.Clone(xa.value())
		case c > 0:
			d.Key, d.Kind, d.B = DecodeKey(xb.key()), api.MissingInA, bytes.Clone(xb.value())
		case !bytes.Equal(xa.value(), xb.value()):
			d.Key, d.Kind, d.A, d.B = DecodeKey(xa.key()), api.ValuesDiffer, bytes.Clone(xa.value()), bytes.Clone(xb.value())
		default:
			xa.next()
			xb.next()
			continue
		}
		break
	}
	if d.Kind == "" {
		if bytes.Equal(ca, cb) {
			return nil, errors.Join(xa.it.Error(), xb.it.Error())
		}
		d.Key, d.Kind, d.A, d.B = DecodeKey(checkpointKey), api.ValuesDiffer, ca, cb
		if ca == nil {
			d.Kind = api.MissingInA
		} else if cb == nil {
			d.Kind = api.MissingInB
		}
	}
	if err := errors.Join(xa.it.Error(), xb.it.Error()); err != nil {
		return nil, fmt.Errorf("projections: compare: %w", err)
	}
	// Event refs and records are stored binary (encode_bin.go): shown as
	// the JSON the API answers.
	d.A, d.B = jsonOfStored(d.Key.Raw, d.A), jsonOfStored(d.Key.Raw, d.B)
	d.ASeq, d.BSeq = a.AppliedSeq(), b.AppliedSeq()
	d.Proposal = proposalOf(d)
	d.Fields = differingFields(d.A, d.B)
	// Values that are not JSON (checkpoints, index times, markers) are
	// shown by String; keep A and B valid JSON for encoders.
	d.A, d.B = asJSON(d.A), asJSON(d.B)
	return d, nil
}

// proposalOf names the proposal a differing key belongs to.
func proposalOf(d *api.Difference) string {
	switch d.Key.Table {
	case api.TableProposal, api.TableHistory, api.TableIndex, api.TableDeadline:
		return d.Key.ID
	case api.TableEventRef:
		for _, v := range [][]byte{d.A, d.B} {
			var ref fold.EventRef
			if v != nil && json.Unmarshal(v, &ref) == nil && len(ref.Proposals) > 0 {
				return ref.Proposals[0]
			}
		}
	}
	return ""
}

// differingFields lists the top-level fields of two JSON objects whose
// values differ (or that only one has), sorted.
func differingFields(a, b []byte) []string {
	var ma, mb map[string]json.RawMessage
	if a == nil || b == nil || json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return nil
	}
	var out []string
	for k, va := range ma {
		if vb, ok := mb[k]; !ok || !bytes.Equal(va, vb) {
			out = append(out, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// asJSON returns v when it is JSON, else v as a JSON string (a checkpoint
// or index time as its decimal number).
func asJSON(v []byte) json.RawMessage {
	if v == nil || (len(v) > 0 && json.Valid(v)) {
		return v
	}
	s := strconv.Quote(string(v))
	if len(v) == 8 {
		s = strconv.FormatUint(binary.BigEndian.Uint64(v), 10)
	}
	return json.RawMessage(s)
}

// rawIter walks every key of a store, in key order, on a snapshot. It
// holds the store's shared lock until close.
type rawIter struct {
	s     *Store
	snap  *pebble.Snapshot
	it    *pebble.Iterator
	valid bool
}

func (s *Store) rawIter() (*rawIter, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	snap := s.db.NewSnapshot()
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: metaLowerBound}) // not the meta keys

	if err != nil {
		_ = snap.Close()
		s.release()
		return nil, fmt.Errorf("projections: iterate: %w", err)
	}
	x := &rawIter{s: s, snap: snap, it: it}
	x.valid = it.First()
	return x, nil
}

func (x *rawIter) key() []byte   { return x.it.Key() }
func (x *rawIter) value() []byte { return x.it.Value() }
func (x *rawIter) next()         { x.valid = x.it.Next() }

func (x *rawIter) close() error {
	err := x.it.Close()
	if cerr := x.snap.Close(); err == nil {
		err = cerr
	}
	x.s.release()
	if err != nil {
		return fmt.Errorf("projections: iterate: %w", err)
	}
	return nil
}
