package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The description of a difference between two projection stores (what
// projections.Compare returns, and the ops API's verify and rebuild
// responses carry). The keys are decoded by projections.DecodeKey.

// Store tables, as KeyInfo.Table names them.
const (
	TableCheckpoint = "checkpoint"
	TableSpace      = "space"
	TableProposal   = "proposal"
	TableHistory    = "history"
	TableEventRef   = "event"
	TableOrphans    = "orphans"
	TableParked     = "parked"
	TableFiled      = "filed"
	TableGap        = "gap"
	TableBridge     = "bridge"
	TableVersion    = "version"
	TableStats      = "stats"
	TableIndex      = "index"
	TableDeadline   = "deadline"
	TableChange     = "change" // the change index (projections/store_changes.go)
	TableUnknown    = "unknown"
)

// KeyInfo is a store key decoded: which table, and the components that
// name the record.
type KeyInfo struct {
	Table string `json:"table"`
	Space string `json:"space,omitempty"`
	// ID is the proposal id (proposal, index, deadline), the key a history
	// entry is filed under, the event id (event) or the awaited id
	// (orphans).
	ID string `json:"id,omitempty"`
	// Seq is a history entry's sequence or an index entry's created_seq.
	Seq uint64 `json:"seq,omitempty"`
	// Index and Value are an index entry's kind and value.
	Index string `json:"index,omitempty"`
	Value string `json:"value,omitempty"`
	// Deadline is a deadline entry's time.
	Deadline time.Time `json:"deadline,omitzero"`
	// Raw is the key itself.
	Raw []byte `json:"raw"`
}

// String describes the key for a person.
func (k KeyInfo) String() string {
	switch k.Table {
	case TableCheckpoint:
		return "the checkpoint"
	case TableSpace:
		return fmt.Sprintf("the marker of space %q", k.Space)
	case TableProposal:
		return fmt.Sprintf("proposal %q in space %q", k.ID, k.Space)
	case TableHistory:
		return fmt.Sprintf("history entry seq %d of %q in space %q", k.Seq, k.ID, k.Space)
	case TableEventRef:
		return fmt.Sprintf("event-id index entry %q in space %q", k.ID, k.Space)
	case TableOrphans:
		return fmt.Sprintf("orphans waiting for %q in space %q", k.ID, k.Space)
	case TableParked:
		return fmt.Sprintf("parked orphan event seq %d in space %q", k.Seq, k.Space)
	case TableVersion:
		return fmt.Sprintf("superseded version %q in space %q", k.ID, k.Space)
	case TableGap:
		return fmt.Sprintf("recording gap seq %d in space %q", k.Seq, k.Space)
	case TableBridge:
		return fmt.Sprintf("bridge session record %q in space %q", k.ID, k.Space)
	case TableRuns:
		return fmt.Sprintf("recorder runs %q in space %q", k.ID, k.Space)
	case TableFiled:
		return fmt.Sprintf("count of entries filed under %q in space %q", k.ID, k.Space)
	case TableStats:
		return fmt.Sprintf("statistics of space %q", k.Space)
	case TableIndex:
		if k.Index == "all" {
			return fmt.Sprintf("index all of space %q: proposal %q (created_seq %d)", k.Space, k.ID, k.Seq)
		}
		return fmt.Sprintf("index %s=%q of space %q: proposal %q (created_seq %d)", k.Index, k.Value, k.Space, k.ID, k.Seq)
	case TableChange:
		return fmt.Sprintf("change seq %d of proposal %q in space %q", k.Seq, k.ID, k.Space)
	case TableDeadline:
		return fmt.Sprintf("deadline %s of proposal %q in space %q", k.Deadline.Format(time.RFC3339Nano), k.ID, k.Space)
	}
	return "key " + strconv.Quote(string(k.Raw))
}

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
