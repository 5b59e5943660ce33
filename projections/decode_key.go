package projections

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/mewledger/ledger/api"
)

// Decoding raw keys (for Compare and dumps). The layout itself is
// store_keys.go's; this file only decodes it.

var indexKindNames = map[byte]string{
	idxAll: "all", idxState: "state", idxProposer: "proposer", idxTarget: "target",
	idxAnomaly: "anomaly", idxActionType: "action_type", idxResourceType: "resource_type", idxDomain: "domain",
	idxForm: "form",
}

// DecodeKey decodes a key of the store's layout. A key that does not
// parse has Table TableUnknown (and Raw).
func DecodeKey(key []byte) api.KeyInfo {
	k := api.KeyInfo{Table: api.TableUnknown, Raw: bytes.Clone(key)}
	if bytes.Equal(key, checkpointKey) {
		k.Table = api.TableCheckpoint
		return k
	}
	if len(key) == 0 {
		return k
	}
	rest := key[1:]
	two := func(table string) api.KeyInfo {
		sp, r, err := readEsc(rest)
		if err != nil {
			return k
		}
		id, r, err := readEsc(r)
		if err != nil || len(r) != 0 {
			return k
		}
		return api.KeyInfo{Table: table, Space: sp, ID: id, Raw: k.Raw}
	}
	switch key[0] {
	case tagSpace, tagStats:
		sp, r, err := readEsc(rest)
		if err != nil || len(r) != 0 {
			return k
		}
		t := api.TableSpace
		if key[0] == tagStats {
			t = api.TableStats
		}
		return api.KeyInfo{Table: t, Space: sp, Raw: k.Raw}
	case tagProposal:
		return two(api.TableProposal)
	case tagEventRef:
		return two(api.TableEventRef)
	case tagOrphans:
		return two(api.TableOrphans)
	case tagFiled:
		return two(api.TableFiled)
	case tagVersion:
		return two(api.TableVersion)
	case tagBridge:
		return two(api.TableBridge)
	case tagRuns:
		return two(api.TableRuns)
	case tagHoles:
		return two(api.TableHoles)
	case tagHoleChange:
		ki := two(api.TableHoleChange)
		if ki.Table == api.TableHoleChange && len(ki.ID) >= 8 {
			ki.Seq, ki.ID = binary.BigEndian.Uint64([]byte(ki.ID[:8])), ki.ID[8:]
		}
		return ki
	case tagParked, tagGap:
		table := api.TableParked
		if key[0] == tagGap {
			table = api.TableGap
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
		return api.KeyInfo{Table: api.TableHistory, Space: sp, ID: id, Seq: binary.BigEndian.Uint64(r), Raw: k.Raw}
	case tagIndex:
		sp, r, err := readEsc(rest)
		if err != nil || len(r) < 1 {
			return k
		}
		name, ok := indexKindNames[r[0]]
		if !ok {
			return k
		}
		out := api.KeyInfo{Table: api.TableIndex, Space: sp, Index: name, Raw: k.Raw}
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
		return api.KeyInfo{Table: api.TableChange, Space: sp, ID: id, Seq: seq, Raw: k.Raw}
	case tagEvent, tagEventIndex, tagEventTime, tagEventPosting:
		if ki, ok := decodeEventKey(key); ok {
			return ki
		}
		return k
	case tagTree:
		if len(rest) != 8 {
			return k
		}
		return api.KeyInfo{Table: TableTree, Seq: binary.BigEndian.Uint64(rest), Raw: k.Raw}
	case tagDeadline:
		nanos, sp, id, err := readDeadlineKey(key)
		if err != nil {
			return k
		}
		return api.KeyInfo{Table: api.TableDeadline, Space: sp, ID: id, Deadline: time.Unix(0, nanos).UTC(), Raw: k.Raw}
	}
	return k
}
