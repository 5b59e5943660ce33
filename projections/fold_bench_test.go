package projections_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// benchEvents builds n stored events of the benchmark mix, as the append
// path would store them.
func benchEvents(b testing.TB, n int) []fold.Event {
	b.Helper()
	g := workload.New(workload.Options{Seed: 42, PadTo: 600})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := make([]fold.Event, 0, n)
	for i := 0; len(evs) < n; i++ {
		raw := g.Next()
		d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0})
		if err != nil {
			b.Fatal(err)
		}
		subj := subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		evs = append(evs, fold.Event{Seq: uint64(len(evs) + 1), Time: t0.Add(time.Duration(i) * time.Millisecond), Subject: subj, Raw: raw})
	}
	return evs
}

// BenchmarkFoldMem measures the pure fold into a MemState.
func BenchmarkFoldMem(b *testing.B) {
	evs := benchEvents(b, 20000)
	f := fold.NewFolder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		st := fold.NewMemState()
		for _, ev := range evs {
			if _, err := f.Apply(st, ev); err != nil {
				b.Fatal(err)
			}
			i++
			if i == b.N {
				break
			}
		}
	}
}

// BenchmarkFoldStore measures the fold into the Pebble store with batches of
// 1000 events, committed with Sync, as the projector does.
func BenchmarkFoldStore(b *testing.B) {
	evs := benchEvents(b, 20000)
	f := fold.NewFolder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		b.StopTimer()
		s, err := projections.OpenStore(projections.StoreOptions{Dir: b.TempDir(), FS: vfs.Default})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		batch := s.NewBatch()
		n := 0
		for _, ev := range evs {
			if _, err := f.Apply(batch, ev); err != nil {
				b.Fatal(err)
			}
			i++
			n++
			if n%1000 == 0 || i == b.N {
				if err := batch.Commit(ev.Seq); err != nil {
					b.Fatal(err)
				}
				batch = s.NewBatch()
			}
			if i == b.N {
				break
			}
		}
		batch.Discard()
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
}

// BenchmarkPipelineTree measures the Pipeline folding 20,000 events in
// runs of 1000 into an in-memory store, with the Merkle tree (tree) and
// without it (none): the tree's share of the fold (issue 24: ≤ 10%).
func BenchmarkPipelineTree(b *testing.B) {
	evs := benchEvents(b, 20000)
	for i := range evs {
		evs[i].MsgID = "default/" + evs[i].Subject + "/digest"
	}
	for _, c := range []struct {
		name string
		skip bool
	}{{"tree", false}, {"none", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, err := projections.OpenStore(projections.StoreOptions{FS: vfs.NewMem(), MemTableSize: 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				pl, err := projections.NewPipeline(s, projections.PipelineOptions{Presize: 1000, SkipTree: c.skip})
				if err != nil {
					b.Fatal(err)
				}
				for lo := 0; lo < len(evs); lo += 1000 {
					run := append([]fold.Event(nil), evs[lo:lo+1000]...)
					if err := pl.Fold(run, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := pl.Close(); err != nil {
					b.Fatal(err)
				}
				_ = s.Close()
			}
			b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
		})
	}
}
