package projections

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// foldIntoStore folds log into a fresh in-memory store in batches of
// batchSize events (Prepare first when prepare is set) and returns its
// Dump.
func foldIntoStore(t *testing.T, log []fold.Event, batchSize int, prepare bool) string {
	t.Helper()
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := fold.NewFolder()
	for lo := 0; lo < len(log); lo += batchSize {
		// Events are copied: Prepare keeps its work in them.
		chunk := append([]fold.Event(nil), log[lo:min(lo+batchSize, len(log))]...)
		b := s.NewBatch()
		if prepare {
			if err := f.Prepare(b, chunk); err != nil {
				t.Fatalf("prepare seq %d..: %v", chunk[0].Seq, err)
			}
		}
		for _, ev := range chunk {
			if _, err := f.Apply(b, ev); err != nil {
				t.Fatalf("seq %d: %v", ev.Seq, err)
			}
		}
		addLeaves(t, b, chunk)
		if err := b.Commit(chunk[len(chunk)-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
	var d strings.Builder
	if err := s.Dump(&d); err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestPrepareChangesNothing folds the log of every data-driven fold script
// (orphans, duplicates, id conflicts, kernel approvals, expiries...) into
// Pebble stores event by event, and prepared in batches of several sizes
// (so that events of one batch depend on each other): the stores must be
// byte-identical.
func TestPrepareChangesNothing(t *testing.T) {
	datadriven.Walk(t, filepath.Join("fold", "testdata", "fold"), func(t *testing.T, path string) {
		s := foldscript.New()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			// Only the log matters here: build it, answer nothing.
			space := "default"
			if td.HasArg("space") {
				td.ScanArgs(t, "space", &space)
			}
			if td.Cmd == "fold" {
				for _, line := range strings.Split(td.Input, "\n") {
					if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
						continue
					}
					ev := s.ParseLine(t, space, line)
					s.Log = append(s.Log, ev)
					if _, err := s.Folder.Apply(s.State, ev); err != nil {
						t.Fatal(err)
					}
				}
			}
			return td.Expected
		})
		if len(s.Log) == 0 {
			return
		}
		want := foldIntoStore(t, s.Log, 1, false)
		for _, n := range []int{1, 2, 3, 7, len(s.Log)} {
			if got := foldIntoStore(t, s.Log, n, true); got != want {
				t.Errorf("prepared in batches of %d: the store differs from the unprepared fold:\nprepared:\n%s\nunprepared:\n%s", n, got, want)
			}
		}
	})
}

// TestPrepareBenchMix does the same for 5,000 events of the benchmark mix
// in batches of 1,000 (decoded on several goroutines, prefetched from a
// store with data).
func TestPrepareBenchMix(t *testing.T) {
	g := workload.New(workload.Options{Seed: 7, PadTo: 600})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var log []fold.Event
	for i := 1; i <= 5000; i++ {
		raw := g.Next()
		d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		subj := subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		log = append(log, fold.Event{Seq: uint64(i), Time: t0.Add(time.Duration(i) * time.Millisecond), Subject: subj, Raw: raw})
	}
	want := foldIntoStore(t, log, 1000, false)
	if got := foldIntoStore(t, log, 1000, true); got != want {
		t.Fatal("prepared fold of the bench mix differs from the unprepared fold")
	}
	for _, state := range []string{"fulfilled", "withdrawn", "rejected"} {
		if !strings.Contains(want, state) {
			t.Fatalf("the bench mix left no proposal %s: the comparison proves little", state)
		}
	}
}

// TestPrepareAfterCommitIsAnError checks that a finished batch is refused.
func TestPrepareAfterCommitIsAnError(t *testing.T) {
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	b.Discard()
	evs := []fold.Event{{Seq: 1, Time: time.Unix(0, 0), Subject: "ledger.default.a.proposal.x", Raw: []byte(`{}`)}}
	if err := fold.NewFolder().Prepare(b, evs); err != ErrBatchDone {
		t.Fatalf("Prepare on a discarded batch: %v, want ErrBatchDone", err)
	}
}
