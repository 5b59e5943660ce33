package projections

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Reading raw keys for Compare. The layout itself is store_keys.go's; this
// file only decodes it.

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
	TableVersion    = "version"
	TableStats      = "stats"
	TableIndex      = "index"
	TableDeadline   = "deadline"
	TableUnknown    = "unknown"
)

var indexKindNames = map[byte]string{
	idxAll: "all", idxState: "state", idxProposer: "proposer", idxTarget: "target",
	idxAnomaly: "anomaly", idxActionType: "action_type", idxResourceType: "resource_type", idxDomain: "domain",
	idxForm: "form",
}

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

// DecodeKey decodes a key of the store's layout. A key that does not
// parse has Table TableUnknown (and Raw).
func DecodeKey(key []byte) KeyInfo {
	k := KeyInfo{Table: TableUnknown, Raw: bytes.Clone(key)}
	if bytes.Equal(key, checkpointKey) {
		k.Table = TableCheckpoint
		return k
	}
	if len(key) == 0 {
		return k
	}
	rest := key[1:]
	two := func(table string) KeyInfo {
		sp, r, err := readEsc(rest)
		if err != nil {
			return k
		}
		id, r, err := readEsc(r)
		if err != nil || len(r) != 0 {
			return k
		}
		return KeyInfo{Table: table, Space: sp, ID: id, Raw: k.Raw}
	}
	switch key[0] {
	case tagSpace, tagStats:
		sp, r, err := readEsc(rest)
		if err != nil || len(r) != 0 {
			return k
		}
		t := TableSpace
		if key[0] == tagStats {
			t = TableStats
		}
		return KeyInfo{Table: t, Space: sp, Raw: k.Raw}
	case tagProposal:
		return two(TableProposal)
	case tagEventRef:
		return two(TableEventRef)
	case tagOrphans:
		return two(TableOrphans)
	case tagFiled:
		return two(TableFiled)
	case tagVersion:
		return two(TableVersion)
	case tagParked, tagGap:
		table := TableParked
		if key[0] == tagGap {
			table = TableGap
		}
		ki := two(table)
		if ki.Table == table && len(ki.ID) == 8 {
			ki.Seq, ki.ID = binary.BigEndian.Uint64([]byte(ki.ID)), ""
		}
		return ki
	case tagHistory:
		sp, r, err := readEsc(rest)
		if err != nil {
			return k
		}
		id, r, err := readEsc(r)
		if err != nil || len(r) != 8 {
			return k
		}
		return KeyInfo{Table: TableHistory, Space: sp, ID: id, Seq: binary.BigEndian.Uint64(r), Raw: k.Raw}
	case tagIndex:
		sp, r, err := readEsc(rest)
		if err != nil || len(r) < 1 {
			return k
		}
		name, ok := indexKindNames[r[0]]
		if !ok {
			return k
		}
		out := KeyInfo{Table: TableIndex, Space: sp, Index: name, Raw: k.Raw}
		r = r[1:]
		if name != "all" {
			if out.Value, r, err = readEsc(r); err != nil {
				return k
			}
		}
		if out.Seq, out.ID, err = readIndexSuffix(r); err != nil {
			return k
		}
		return out
	case tagChange:
		seq, sp, id, err := readChangeKey(key)
		if err != nil {
			return k
		}
		return KeyInfo{Table: TableChange, Space: sp, ID: id, Seq: seq, Raw: k.Raw}
	case tagDeadline:
		nanos, sp, id, err := readDeadlineKey(key)
		if err != nil {
			return k
		}
		return KeyInfo{Table: TableDeadline, Space: sp, ID: id, Deadline: time.Unix(0, nanos).UTC(), Raw: k.Raw}
	}
	return k
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
