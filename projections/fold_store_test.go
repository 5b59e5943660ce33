package projections

import (
	"encoding/json"
	"errors"
	"testing"
)

// compareWithStore folds log into a fresh Pebble store (in-memory vfs), in
// batches of three events (so that reads cross both the overlay and
// Pebble), and checks that every proposal, history, statistics and gap
// list of mem is exactly what the store holds.
func compareWithStore(t *testing.T, mem *MemState, log []Event) {
	t.Helper()
	s := openMemStore(t)
	f := NewFolder()
	for i := 0; i < len(log); i += 3 {
		b := s.NewBatch()
		end := min(i+3, len(log))
		for _, ev := range log[i:end] {
			if _, err := f.Apply(b, ev); err != nil {
				t.Fatalf("store fold seq %d: %v", ev.Seq, err)
			}
		}
		if err := b.Commit(log[end-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
	enc := func(v any) string { j, _ := json.Marshal(v); return string(j) }
	for _, sp := range mem.Spaces() {
		for _, p := range mem.Proposals(sp) {
			got, err := s.Get(p.Space, p.ID)
			if err != nil {
				t.Fatalf("store: proposal %q in %q: %v", p.ID, sp, err)
			}
			if a, b := enc(p), enc(got); a != b {
				t.Fatalf("proposal %q differs:\nmem:   %s\nstore: %s", p.ID, a, b)
			}
		}
		for _, key := range mem.HistoryKeys(sp) {
			got, err := s.History(sp, key)
			if err != nil {
				t.Fatalf("store: history %q: %v", key, err)
			}
			if a, b := enc(mem.History(sp, key)), enc(got); a != b {
				t.Fatalf("history of %q differs:\nmem:   %s\nstore: %s", key, a, b)
			}
		}
		ms, _ := mem.Stats(sp)
		ss, err := s.Stats(sp)
		if err != nil {
			t.Fatal(err)
		}
		if ms != nil {
			if a, b := enc(ms), enc(ss); a != b {
				t.Fatalf("stats of %q differ:\nmem:   %s\nstore: %s", sp, a, b)
			}
		}
		gaps, _, err := s.Gaps(sp, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := mem.Gaps(sp)
		if len(want) == 0 {
			want = []Gap{}
		}
		if a, b := enc(want), enc(gaps); a != b {
			t.Fatalf("gaps of %q differ:\nmem:   %s\nstore: %s", sp, a, b)
		}
	}
	if _, err := s.Get("no-such-space", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("store Get of nothing: %v", err)
	}
}
