package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// DiffKind says how two stores differ at a key.
type DiffKind string

// Kinds of difference.
const (
	MissingInA   DiffKind = "missing_in_a"
	MissingInB   DiffKind = "missing_in_b"
	ValuesDiffer DiffKind = "values_differ"
)

// Difference is the first difference between two stores (see Compare).
type Difference struct {
	// Key is the differing key, decoded.
	Key KeyInfo `json:"key"`
	// Kind says how it differs.
	Kind DiffKind `json:"kind"`
	// Proposal is the proposal the key belongs to, when there is one: the
	// proposal, history, index and deadline keys name it, an event-id
	// entry names the proposals it was applied to (the first one here).
	Proposal string `json:"proposal,omitempty"`
	// A and B are the values in each store (nil when missing).
	A json.RawMessage `json:"a"`
	B json.RawMessage `json:"b"`
	// Fields are the top-level JSON fields whose values differ, when both
	// values are JSON objects.
	Fields []string `json:"fields,omitempty"`
	// ASeq and BSeq are the stores' checkpoints.
	ASeq uint64 `json:"a_seq"`
	BSeq uint64 `json:"b_seq"`
}

// String describes the difference for a person, calling the stores a
// and b.
func (d *Difference) String() string { return d.Format("a", "b") }

// Format describes the difference, calling the stores by the given names
// (e.g. "live" and "rebuild").
func (d *Difference) Format(aName, bName string) string {
	key := d.Key.String()
	if d.Proposal != "" && d.Key.Table != TableProposal {
		key += fmt.Sprintf(" (proposal %q)", d.Proposal)
	}
	var s string
	switch d.Kind {
	case MissingInA:
		s = fmt.Sprintf("%s: missing in %s, in %s: %s", key, aName, bName, show(d.B))
	case MissingInB:
		s = fmt.Sprintf("%s: missing in %s, in %s: %s", key, bName, aName, show(d.A))
	default:
		s = fmt.Sprintf("%s: values differ", key)
		if len(d.Fields) > 0 {
			s += fmt.Sprintf(" (fields %v)", d.Fields)
		}
		s += fmt.Sprintf(":\n  %s: %s\n  %s: %s", aName, show(d.A), bName, show(d.B))
	}
	return s
}

// show renders a value: JSON as is, a checkpoint as its number, anything
// else quoted; long values cut.
func show(v []byte) string {
	const maxShow = 2048
	var s string
	switch {
	case v == nil:
		return "(none)"
	case len(v) == 0:
		return `""`
	case json.Valid(v):
		s = string(v)
	case len(v) == 8:
		s = strconv.FormatUint(beU64(v), 10)
	default:
		s = strconv.Quote(string(v))
	}
	if len(s) > maxShow {
		s = s[:maxShow] + "…"
	}
	return s
}

func beU64(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}

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
func Compare(a, b *Store) (*Difference, error) {
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

	d := &Difference{}
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
			d.Key, d.Kind, d.A = DecodeKey(xa.key()), MissingInB, bytes.Clone(xa.value())
		case c > 0:
			d.Key, d.Kind, d.B = DecodeKey(xb.key()), MissingInA, bytes.Clone(xb.value())
		case !bytes.Equal(xa.value(), xb.value()):
			d.Key, d.Kind, d.A, d.B = DecodeKey(xa.key()), ValuesDiffer, bytes.Clone(xa.value()), bytes.Clone(xb.value())
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
		d.Key, d.Kind, d.A, d.B = DecodeKey(checkpointKey), ValuesDiffer, ca, cb
		if ca == nil {
			d.Kind = MissingInA
		} else if cb == nil {
			d.Kind = MissingInB
		}
	}
	if err := errors.Join(xa.it.Error(), xb.it.Error()); err != nil {
		return nil, fmt.Errorf("projections: compare: %w", err)
	}
	d.ASeq, d.BSeq = a.AppliedSeq(), b.AppliedSeq()
	d.Proposal = proposalOf(d)
	d.Fields = differingFields(d.A, d.B)
	// Values that are not JSON (checkpoints, index times, markers) are
	// shown by String; keep A and B valid JSON for encoders.
	d.A, d.B = asJSON(d.A), asJSON(d.B)
	return d, nil
}

// proposalOf names the proposal a differing key belongs to.
func proposalOf(d *Difference) string {
	switch d.Key.Table {
	case TableProposal, TableHistory, TableIndex, TableDeadline:
		return d.Key.ID
	case TableEventRef:
		for _, v := range [][]byte{d.A, d.B} {
			var ref EventRef
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
		s = strconv.FormatUint(beU64(v), 10)
	}
	return json.RawMessage(s)
}
