package projections

import (
	"errors"
	"reflect"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/fold"
)

// FuzzDecodeBinary feeds arbitrary bytes to the store format 2 decoders
// (event refs, event records, history entries, changes): each refuses
// with errBadValue or decodes, never panics, and what it decodes encodes
// to bytes that decode to the same value (a damaged store is reported by
// verify, not by a crash).
func FuzzDecodeBinary(f *testing.F) {
	for _, r := range binRecords {
		f.Add(appendEventRecordBin(nil, r))
	}
	f.Add(appendEventRefBin(nil, &fold.EventRef{Seq: 7, Digest: "d"}))
	f.Add(appendHistoryBin(nil, &api.HistoryEntry{Seq: 3, ID: "e", Type: "proposal", Effect: api.EffectApplied}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		check := func(what string, err error) bool {
			if err != nil && !errors.Is(err, errBadValue) {
				t.Fatalf("%s: error %v is not errBadValue", what, err)
			}
			return err == nil
		}
		var ref fold.EventRef
		if check("event ref", decodeEventRef(v, &ref)) {
			var again fold.EventRef
			if err := decodeEventRef(appendEventRefBin(nil, &ref), &again); err != nil || !reflect.DeepEqual(again, ref) {
				t.Fatalf("event ref round trip: %v\n got %+v\nwant %+v", err, again, ref)
			}
		}
		if r, err := decodeEventRecord(9, v); check("event record", err) {
			again, err := decodeEventRecord(9, appendEventRecordBin(nil, r))
			if err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("event record round trip: %v\n got %+v\nwant %+v", err, again, r)
			}
		}
		var h api.HistoryEntry
		if check("history", decodeHistory(9, v, &h)) {
			var again api.HistoryEntry
			if err := decodeHistory(9, appendHistoryBin(nil, &h), &again); err != nil || !reflect.DeepEqual(again, h) {
				t.Fatalf("history round trip: %v\n got %+v\nwant %+v", err, again, h)
			}
		}
		var c api.Change
		if check("change", decodeChange(9, "s", "p", v, &c)) {
			var again api.Change
			if err := decodeChange(9, "s", "p", appendChangeBin(nil, &c), &again); err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("change round trip: %v\n got %+v\nwant %+v", err, again, c)
			}
		}
	})
}
