package projections

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Reading raw keys for Compare. The layout itself is store_keys.go's; this
// file only decodes it.

var indexKindNames = map[byte]string{
	idxAll: "all", idxState: "state", idxProposer: "proposer", idxTarget: "target",
	idxAnomaly: "anomaly", idxActionType: "action_type", idxResourceType: "resource_type", idxDomain: "domain",
	idxForm: "form",
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
	case tagTree:
		if len(rest) != 8 {
			return k
		}
		return KeyInfo{Table: TableTree, Seq: binary.BigEndian.Uint64(rest), Raw: k.Raw}
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
