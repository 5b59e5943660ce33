package projections

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/projections/fold"
)

// TestFoldScriptsOnStore runs the fold's data-driven scripts
// (fold/testdata/fold) again, checking at each replay and at the end of
// every script that the Pebble store, committed in batches of one and of
// many, holds exactly what the MemState holds.
func TestFoldScriptsOnStore(t *testing.T) {
	foldscript.Walk(t, filepath.Join("fold", "testdata", "fold"), compareWithStore)
}

// compareWithStore folds log into fresh Pebble stores (in-memory vfs) —
// committed event by event, in batches of three (so that reads cross both
// the overlay and Pebble), and through the Pipeline (prepared, handed off)
// in runs of seven and in one run of the whole log — and checks that every
// proposal, history, statistics and gap list of mem is exactly what each
// store holds, and that the stores are byte-identical.
func compareWithStore(t *testing.T, mem *fold.MemState, log []fold.Event) {
	t.Helper()
	var first string
	for _, c := range []struct {
		size     int
		pipeline bool
	}{{1, false}, {3, false}, {7, true}, {max(len(log), 1), true}} {
		s := openMemStore(t)
		if c.pipeline {
			pl, err := NewPipeline(s, PipelineOptions{Folder: foldscript.Folder()})
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range runs(log, 0, c.size) {
				if err := pl.Fold(run, nil); err != nil {
					t.Fatalf("pipeline, runs of %d: %v", c.size, err)
				}
			}
			if err := pl.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			foldBatches(t, s, log, c.size)
		}
		compareViews(t, mem, s)
		if d := dumpStore(t, s); first == "" {
			first = d
		} else if d != first {
			t.Fatalf("the store committed in batches of %d (pipeline %t) differs from the one committed event by event", c.size, c.pipeline)
		}
	}
}

// foldBatches folds log into s, unprepared, committing every size events.
func foldBatches(t *testing.T, s *Store, log []fold.Event, size int) {
	t.Helper()
	f := foldscript.Folder()
	for i := 0; i < len(log); i += size {
		b := s.NewBatch()
		end := min(i+size, len(log))
		for _, ev := range log[i:end] {
			if _, err := f.Apply(b, ev); err != nil {
				t.Fatalf("store fold seq %d: %v", ev.Seq, err)
			}
		}
		addLeaves(t, b, log[i:end])
		if err := b.Commit(log[end-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
}

// compareViews checks that every proposal, history, statistics and gap
// list of mem is exactly what s serves.
func compareViews(t *testing.T, mem *fold.MemState, s *Store) {
	t.Helper()
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
		if ms == nil {
			ms = api.NewStats() // what the store serves for a space without stats
		}
		if a, b := enc(ms), enc(ss); a != b {
			t.Fatalf("stats of %q differ:\nmem:   %s\nstore: %s", sp, a, b)
		}
		gaps, _, err := s.Gaps(sp, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := mem.Gaps(sp)
		if len(want) == 0 {
			want = []api.Gap{}
		}
		if a, b := enc(want), enc(gaps); a != b {
			t.Fatalf("gaps of %q differ:\nmem:   %s\nstore: %s", sp, a, b)
		}
		// Coverage and holes (contract §14): the same from either.
		recs, runs := mem.BridgeSessions(sp)
		var frs []fold.Recorder
		for _, r := range recs {
			frs = append(frs, fold.Recorder{Record: r, Runs: runs[fold.BridgeKey(r.Bridge, r.MEWSpace)]})
		}
		memHoles := fold.Cover(want, frs)
		cov, err := s.Coverage(sp, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range cov.Holes {
			for _, e := range []*api.HoleEdge{h.After, h.Before} {
				if e != nil {
					e.ID, e.At = "", nil
				}
			}
		}
		if len(memHoles) == 0 {
			memHoles = []api.Hole{}
		}
		if a, b := enc(want), enc(cov.Gaps); a != b {
			t.Fatalf("covered gaps of %q differ:\nmem:   %s\nstore: %s", sp, a, b)
		}
		if a, b := enc(memHoles), enc(cov.Holes); a != b {
			t.Fatalf("holes of %q differ:\nmem:   %s\nstore: %s", sp, a, b)
		}
	}
	if _, err := s.Get("no-such-space", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("store Get of nothing: %v", err)
	}
}
