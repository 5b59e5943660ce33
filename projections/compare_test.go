package projections_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

var cmpT0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func cmpStore(t *testing.T) *projections.Store {
	t.Helper()
	s, err := projections.OpenStore(projections.StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// cmpEvent makes the stored form of an envelope appended at seq.
func cmpEvent(t *testing.T, seq uint64, raw []byte) fold.Event {
	t.Helper()
	d, err := ledger.Decode(raw, ledger.DecodeOptions{})
	if err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	subj := subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
	return fold.Event{Seq: seq, Time: cmpT0.Add(time.Duration(seq) * time.Millisecond), Subject: subj, Raw: raw}
}

// cmpFold folds events into s, one commit per event.
func cmpFold(t *testing.T, s *projections.Store, evs []fold.Event) {
	t.Helper()
	f := fold.NewFolder()
	for _, ev := range evs {
		b := s.NewBatch()
		if _, err := f.Apply(b, ev); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(ev.Seq); err != nil {
			t.Fatal(err)
		}
	}
}

func cmpTraffic(t *testing.T, n int) []fold.Event {
	g := workload.New(workload.Options{Seed: 5, Disorder: 10, Duplicates: 5, Foreign: 20,
		Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	var evs []fold.Event
	for i, raw := range g.Batch(n) {
		evs = append(evs, cmpEvent(t, uint64(i+1), raw))
	}
	return evs
}

func TestCompareIdentical(t *testing.T) {
	evs := cmpTraffic(t, 400)
	a, b := cmpStore(t), cmpStore(t)
	cmpFold(t, a, evs)
	cmpFold(t, b, evs)
	d, err := projections.Compare(a, b)
	if err != nil || d != nil {
		t.Fatalf("Compare of identical stores = %v, %v", d, err)
	}
	if d, err := projections.Compare(a, a); d != nil || err != nil {
		t.Fatalf("Compare(a, a) = %v, %v", d, err)
	}
}

// TestCompareExtraEvent: one more event folded into b is reported as the
// first record it changed, naming the proposal, with both values.
func TestCompareExtraEvent(t *testing.T) {
	evs := cmpTraffic(t, 300)
	a, b := cmpStore(t), cmpStore(t)
	cmpFold(t, a, evs)
	cmpFold(t, b, evs)
	extra := cmpEvent(t, uint64(len(evs)+1), []byte(`{"protocol":"mew/v0.4","id":"late-reject","from":"auditor","kind":"mcp/reject","correlation_id":["p-1"],"payload":{"reason":"policy"}}`))
	cmpFold(t, b, []fold.Event{extra})

	d, err := projections.Compare(a, b)
	if err != nil || d == nil {
		t.Fatalf("Compare = %v, %v; want a difference", d, err)
	}
	if d.Proposal != "p-1" {
		t.Fatalf("difference does not name proposal p-1: %+v\n%s", d, d)
	}
	if d.ASeq != uint64(len(evs)) || d.BSeq != uint64(len(evs)+1) {
		t.Fatalf("checkpoints %d %d", d.ASeq, d.BSeq)
	}
	if d.Kind != api.MissingInA || d.Key.Table != api.TableEventRef || d.Key.ID != "late-reject" {
		// The event-id index sorts before history and proposals.
		t.Fatalf("first difference: %s", d)
	}
	if !strings.Contains(d.String(), `"late-reject"`) || !strings.Contains(d.String(), "missing in a") {
		t.Fatalf("String: %s", d)
	}
	// The difference encodes as JSON (for `ledger verify -o json`).
	if _, err := json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	// And the other way round.
	d2, _ := projections.Compare(b, a)
	if d2 == nil || d2.Kind != api.MissingInB || d2.Proposal != "p-1" {
		t.Fatalf("reverse: %s", d2)
	}
}

// TestCompareValuesDiffer: the same events but one with another reason:
// the proposal record differs, and the differing fields are listed.
func TestCompareValuesDiffer(t *testing.T) {
	base := []fold.Event{
		cmpEvent(t, 1, []byte(`{"protocol":"mew/v0.4","id":"x","from":"alice","kind":"mcp/proposal","payload":{"method":"m","params":{}}}`)),
	}
	a, b := cmpStore(t), cmpStore(t)
	cmpFold(t, a, append(base, cmpEvent(t, 2, []byte(`{"protocol":"mew/v0.4","id":"r","from":"bob","kind":"mcp/reject","correlation_id":["x"],"payload":{"reason":"unsafe"}}`))))
	cmpFold(t, b, append(base, cmpEvent(t, 2, []byte(`{"protocol":"mew/v0.4","id":"r","from":"bob","kind":"mcp/reject","correlation_id":["x"],"payload":{"reason":"policy"}}`))))
	d, err := projections.Compare(a, b)
	if err != nil || d == nil {
		t.Fatalf("Compare = %v, %v", d, err)
	}
	if d.Kind != api.ValuesDiffer || d.Proposal != "x" {
		t.Fatalf("difference: %s", d)
	}
	t.Log(d)
}

func TestDecodeKey(t *testing.T) {
	s := cmpStore(t)
	cmpFold(t, s, []fold.Event{
		cmpEvent(t, 1, []byte(`{"protocol":"mew/v0.4","id":"a.b c","from":"alice","to":["t1"],"kind":"mcp/proposal","payload":{"method":"m","params":{},"ttl_ms":1000}}`)),
	})
	var tables []string
	seen := map[string]bool{}
	// Every key of a real store decodes; the dump lists them.
	var buf strings.Builder
	if err := s.Dump(&buf); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var key string
		if _, err := fmt.Sscanf(line, "%q", &key); err != nil {
			t.Fatalf("dump line %q: %v", line, err)
		}
		k := projections.DecodeKey([]byte(key))
		if k.Table == api.TableUnknown {
			t.Fatalf("key %q does not decode", key)
		}
		switch k.Table {
		case projections.TableEvent, projections.TableEventIndex, projections.TableEventTime:
			// The event index is keyed by sequence (store_events.go).
			if k.Seq != 1 {
				t.Fatalf("key %q decodes to %+v", key, k)
			}
		case projections.TableEventPosting:
			// Posting lists are keyed by block: seq 1 is in the first.
			if k.Seq != 0 || k.Index == "" {
				t.Fatalf("key %q decodes to %+v", key, k)
			}
		default:
			if k.Table != api.TableCheckpoint && k.Table != api.TableStats && k.Table != api.TableSpace && k.ID != "a.b c" {
				t.Fatalf("key %q decodes to %+v", key, k)
			}
		}
		if k.Table == api.TableDeadline && !k.Deadline.Equal(cmpT0.Add(time.Millisecond+time.Second)) {
			t.Fatalf("deadline %v", k.Deadline)
		}
		if !seen[k.Table] {
			seen[k.Table] = true
			tables = append(tables, k.Table)
		}
		_ = k.String()
	}
	for _, want := range []string{api.TableCheckpoint, api.TableProposal, api.TableHistory, api.TableIndex, api.TableDeadline, api.TableEventRef, api.TableStats, api.TableSpace} {
		if !slices.Contains(tables, want) {
			t.Errorf("no %s key in %v", want, tables)
		}
	}
	if k := projections.DecodeKey([]byte("Pnot-escaped")); k.Table != api.TableUnknown {
		t.Fatalf("garbage decodes as %+v", k)
	}
}
