package projections

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

var binRecords = []*EventRecord{
	{Seq: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Space: "default", Entries: []EventEntry{}, Effects: []api.Effect{}},
	{Seq: 2, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Space: "s\x00p", Key: "k", ID: "id-1", Type: "proposal", Kind: "mcp/proposal",
		Form: "f", From: "alice", Reason: "r", Method: "tools/call", Tool: "run", Arg: "<&>\u2028é",
		Digest: strings.Repeat("ab", 32),
		Entries: []EventEntry{
			{Key: "p2", Effect: api.EffectOrphan, Target: "t", Anomalies: []string{"b", "a"}},
			{Key: "p1", Effect: api.EffectApplied, Code: "c", Detail: "d", Outcome: "o", ResolvedSeq: 9},
			{Key: "p3", Effect: api.EffectInvalid, Code: "x", Anomalies: []string{"a"}},
		}},
	{Seq: 1 << 40, At: time.Unix(-5, 7).UTC(), Digest: "not hex", Entries: []EventEntry{{Key: "", Effect: "odd"}}},
	{Seq: 3, At: time.Unix(1, 0).UTC(), Digest: strings.Repeat("AB", 32), Entries: []EventEntry{}},
}

// TestEventRecordBinary checks that a record read back from its binary
// form is answered with the JSON json.Marshal writes of the record the
// fold kept.
func TestEventRecordBinary(t *testing.T) {
	for _, r := range binRecords {
		r.Derive()
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		v := appendEventRecordBin(nil, r)
		got, err := decodeEventRecord(r.Seq, v)
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		gotJSON, err := appendMarshalEvent(nil, got)
		if err != nil {
			t.Fatal(err)
		}
		if string(gotJSON) != string(want) {
			t.Fatalf("seq %d:\n got %s\nwant %s", r.Seq, gotJSON, want)
		}
		if j := jsonOfStored(eventKey(r.Seq), v); string(j) != string(want) {
			t.Fatalf("jsonOfStored seq %d:\n got %s\nwant %s", r.Seq, j, want)
		}
		for i := range v { // every truncation is refused
			if _, err := decodeEventRecord(r.Seq, v[:i]); !errors.Is(err, errBadValue) {
				t.Fatalf("seq %d cut at %d: err %v, want errBadValue", r.Seq, i, err)
			}
		}
		if _, err := decodeEventRecord(r.Seq, append(v, 0)); !errors.Is(err, errBadValue) {
			t.Fatalf("seq %d with a trailing byte: err %v", r.Seq, err)
		}
	}
}

func TestEventRefBinary(t *testing.T) {
	for _, r := range []fold.EventRef{
		{Seq: 1, Type: ledger.TypeProposal, Digest: strings.Repeat("0f", 32), From: "a", Status: fold.EventApplied, Proposals: []string{"p", "q"}},
		{Seq: 1 << 50, Type: ledger.TypeExpire, Digest: "", Status: fold.EventInvalid},
		{Seq: 0, Digest: strings.Repeat("g", 64)},
	} {
		v := appendEventRefBin(nil, &r)
		var got fold.EventRef
		if err := decodeEventRef(v, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("got %+v, want %+v", got, r)
		}
		if j := jsonOfStored(eventRefKey("s", "id"), v); string(j) != string(appendEventRef(nil, &r)) {
			t.Fatalf("jsonOfStored = %s", j)
		}
		for i := range v {
			if err := decodeEventRef(v[:i], &got); !errors.Is(err, errBadValue) {
				t.Fatalf("cut at %d: err %v", i, err)
			}
		}
	}
}

// TestStoreFormat checks that a new store records its format, that it
// opens again, and that a store of format 1 (no format key, records) or
// of another format is refused with ErrStoreFormat, naming rebuild.
func TestStoreFormat(t *testing.T) {
	fs := vfs.NewMem()
	open := func() (*Store, error) { return OpenStore(StoreOptions{FS: fs, Dir: "p"}) }
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = open()
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	b := s.NewBatch()
	if err := b.PutStats("default", api.NewStats()); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	set := func(f func(db *pebble.DB) error) {
		t.Helper()
		db, err := pebble.Open("p", &pebble.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if err := f(db); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = open(); err != nil {
		t.Fatalf("reopen with data: %v", err)
	}
	_ = s.Close()
	for _, c := range []struct {
		name string
		f    func(db *pebble.DB) error
		want string
	}{
		{"format 1", func(db *pebble.DB) error { return db.Delete(formatKey, pebble.Sync) }, "store format 1"},
		{"format 2", func(db *pebble.DB) error { return db.Set(formatKey, []byte("2"), pebble.Sync) }, "store format 2"},
		{"format 4", func(db *pebble.DB) error { return db.Set(formatKey, []byte("4"), pebble.Sync) }, "store format 4"},
	} {
		set(c.f)
		_, err := open()
		if !errors.Is(err, ErrStoreFormat) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ledger rebuild") {
			t.Fatalf("%s: open: %v", c.name, err)
		}
	}
}

// TestHistoryChangeBinary checks that history entries and changes read
// back from their binary form marshal as the originals did (UTC times,
// as the fold writes them, and a time with an offset).
func TestHistoryChangeBinary(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	off := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("", 3600))
	for _, h := range []api.HistoryEntry{
		{Seq: 7, ID: "i", Type: "proposal", Kind: "mcp/proposal", From: "a", At: at, Effect: api.EffectApplied},
		{Seq: 1 << 60, At: off, Effect: api.EffectOrphan, Reason: "r", Code: "c", Detail: "d<&>", Anomalies: []string{"x", "y"},
			Target: "t", Text: "te", Outcome: "o", ResolvedSeq: 3, Form: "f", Note: "n", Status: "s"},
		{Seq: 1, Anomalies: []string{}},
	} {
		want, _ := json.Marshal(h)
		v := appendHistoryBin(nil, &h)
		var got api.HistoryEntry
		if err := decodeHistory(h.Seq, v, &got); err != nil {
			t.Fatal(err)
		}
		if j, _ := json.Marshal(got); string(j) != string(want) {
			t.Fatalf("history:\n got %s\nwant %s", j, want)
		}
		key := appendU64(historyPrefix("s", "k"), h.Seq)
		if j := jsonOfStored(key, v); string(j) != string(want) {
			t.Fatalf("jsonOfStored history:\n got %s\nwant %s", j, want)
		}
		for i := range v {
			if err := decodeHistory(h.Seq, v[:i], &got); !errors.Is(err, errBadValue) {
				t.Fatalf("history cut at %d: err %v", i, err)
			}
		}
	}
	for _, c := range []api.Change{
		{Seq: 9, Space: "s", ID: "p", State: api.StatePending, Anomalies: []string{}, Event: "p", At: at},
		{Seq: 10, Space: "s\x00", ID: "p\x00q", State: api.StateFulfilled, PrevState: api.StatePending,
			Anomalies: []string{"a"}, Added: []string{"a"}, Event: "e", DecidedBy: "b", At: off},
	} {
		want, _ := json.Marshal(c)
		v := appendChangeBin(nil, &c)
		var got api.Change
		if err := decodeChange(c.Seq, c.Space, c.ID, v, &got); err != nil {
			t.Fatal(err)
		}
		if j, _ := json.Marshal(got); string(j) != string(want) {
			t.Fatalf("change:\n got %s\nwant %s", j, want)
		}
		key := appendEsc(appendEsc(appendU64([]byte{tagChange}, c.Seq), c.Space), c.ID)
		if j := jsonOfStored(key, v); string(j) != string(want) {
			t.Fatalf("jsonOfStored change:\n got %s\nwant %s", j, want)
		}
	}
}
