package projections

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// mixLog returns n events of a workload with orphans, duplicates and
// every lifecycle operation, numbered from 1.
func mixLog(t testing.TB, n int) []fold.Event {
	t.Helper()
	g := workload.New(workload.Options{Seed: 11, PadTo: 200, Disorder: 20, Duplicates: 5,
		Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 15, Response: 10, Chat: 10}})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log := make([]fold.Event, 0, n)
	for i := 1; i <= n; i++ {
		raw := g.Next()
		subj := "ledger.default.x.proposal.y"
		if d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0}); err == nil && d.Type.Valid() {
			subj = subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		log = append(log, fold.Event{Seq: uint64(i), Time: t0.Add(time.Duration(i) * time.Millisecond), Subject: subj, Raw: raw})
	}
	return log
}

// runs cuts log[lo:] into runs of size events, each a copy (the pipeline
// keeps its decoding in the events).
func runs(log []fold.Event, lo, size int) [][]fold.Event {
	var out [][]fold.Event
	for ; lo < len(log); lo += size {
		out = append(out, append([]fold.Event(nil), log[lo:min(lo+size, len(log))]...))
	}
	return out
}

func dumpStore(t *testing.T, s *Store) string {
	t.Helper()
	var d strings.Builder
	if err := s.Dump(&d); err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// pipelineRecorder records the settles of a pipeline and checks, in each,
// that the batch is committed: the store's checkpoint is its last
// sequence.
type pipelineRecorder struct {
	t       *testing.T
	s       *Store
	settled []BatchInfo
}

func (r *pipelineRecorder) settle(info BatchInfo) {
	if cp := r.s.AppliedSeq(); cp != info.LastSeq {
		r.t.Errorf("settled seq %d..%d with the checkpoint at %d", info.FirstSeq, info.LastSeq, cp)
	}
	r.settled = append(r.settled, info)
}

// TestPipelineFoldsLikeEventByEvent: the pipeline, in runs of one, a few
// and many events, leaves the store byte-identical to a fold committed
// event by event; every run is settled once, in order, after its commit
// (the checkpoint is its last sequence when it settles), and nothing is
// settled before it committed.
func TestPipelineFoldsLikeEventByEvent(t *testing.T) {
	log := mixLog(t, 1500)
	want := foldIntoStore(t, log, 1, false)
	for _, size := range []int{1, 7, 250, len(log)} {
		s := openMemStore(t)
		rec := &pipelineRecorder{t: t, s: s}
		pl, err := NewPipeline(s, PipelineOptions{Presize: size})
		if err != nil {
			t.Fatal(err)
		}
		rs := runs(log, 0, size)
		for i, run := range rs {
			if err := pl.Fold(run, rec.settle); err != nil {
				t.Fatalf("runs of %d: run %d: %v", size, i, err)
			}
			// At most the run just folded is unsettled.
			if len(rec.settled) < i {
				t.Fatalf("runs of %d: after run %d only %d settled", size, i, len(rec.settled))
			}
		}
		if err := pl.Close(); err != nil {
			t.Fatal(err)
		}
		if len(rec.settled) != len(rs) {
			t.Fatalf("runs of %d: %d settles for %d runs", size, len(rec.settled), len(rs))
		}
		next := uint64(1)
		for _, info := range rec.settled {
			if info.FirstSeq != next || info.Events != int(info.LastSeq-info.FirstSeq+1) {
				t.Fatalf("runs of %d: settled %+v, want it to start at %d", size, info, next)
			}
			next = info.LastSeq + 1
		}
		if s.AppliedSeq() != uint64(len(log)) || pl.Next() != uint64(len(log))+1 {
			t.Fatalf("runs of %d: checkpoint %d, next %d", size, s.AppliedSeq(), pl.Next())
		}
		if got := dumpStore(t, s); got != want {
			t.Fatalf("runs of %d: the store differs from the event-by-event fold", size)
		}
		if err := pl.Fold(log[:1], nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("Fold after Close: %v, want ErrClosed", err)
		}
		if err := pl.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// TestPipelineFedAgainAfterRestart: a store reopened after part of the log
// was committed gets the whole log again (a redelivery from sequence 1,
// runs that straddle the checkpoint): nothing is applied twice, and only
// the new sequences are settled.
func TestPipelineFedAgainAfterRestart(t *testing.T) {
	log := mixLog(t, 900)
	want := foldIntoStore(t, log, 1, false)
	fs := vfs.NewMem()
	open := func() *Store {
		s, err := OpenStore(StoreOptions{FS: fs, Dir: "p", MemTableSize: 4 << 20, CacheSize: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	pl, err := NewPipeline(s, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range runs(log[:400], 0, 100) {
		if err := pl.Fold(run, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open()
	defer s.Close()
	if s.AppliedSeq() != 400 {
		t.Fatalf("reopened at %d, want 400", s.AppliedSeq())
	}
	rec := &pipelineRecorder{t: t, s: s}
	pl, err = NewPipeline(s, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Next() != 401 {
		t.Fatalf("Next %d after a restart at 400", pl.Next())
	}
	for _, run := range runs(log, 0, 150) { // 301..450 straddles 400
		if err := pl.Fold(run, rec.settle); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rec.settled) == 0 || rec.settled[0].FirstSeq != 401 || rec.settled[len(rec.settled)-1].LastSeq != 900 {
		t.Fatalf("settled %+v, want 401..900", rec.settled)
	}
	if got := dumpStore(t, s); got != want {
		t.Fatal("the log fed again after a restart left a store that differs from one fold of it")
	}
}

// TestPipelineGapStops: a run that skips a sequence folds nothing and
// stops the pipeline with ErrGap; the committed runs stay.
func TestPipelineGapStops(t *testing.T) {
	log := mixLog(t, 60)
	s := openMemStore(t)
	pl, err := NewPipeline(s, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pl.Fold(append([]fold.Event(nil), log[:20]...), nil); err != nil {
		t.Fatal(err)
	}
	holed := append(append([]fold.Event(nil), log[20:30]...), log[31:40]...)
	if err := pl.Fold(holed, nil); !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), "expected seq 31, got 32") {
		t.Fatalf("Fold with a hole: %v, want ErrGap at 31", err)
	}
	if err := pl.Fold(append([]fold.Event(nil), log[20:30]...), nil); !errors.Is(err, ErrGap) {
		t.Fatalf("Fold after the gap: %v, want the gap again", err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if s.AppliedSeq() != 20 {
		t.Fatalf("checkpoint %d, want 20 (the run before the gap)", s.AppliedSeq())
	}
}

// TestPipelineFailedCommitStops: the store's WAL fails under a commit. The
// pipeline reports it (a *CommitError naming the run's last sequence) from
// the next call that settles, never settles that run nor any after it, and
// the checkpoint stays at the last run that committed.
func TestPipelineFailedCommitStops(t *testing.T) {
	log := mixLog(t, 500)
	fault := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	s, err := OpenStore(StoreOptions{FS: errorfs.Wrap(vfs.NewMem(), fault), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	rec := &pipelineRecorder{t: t, s: s}
	pl, err := NewPipeline(s, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs := runs(log, 0, 100)
	for _, run := range rs[:2] {
		if err := pl.Fold(run, rec.settle); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Settle(); err != nil {
		t.Fatal(err)
	}
	// A fresh memtable: run 3's commit must fail writing the WAL, not in
	// a memtable rotation (where Pebble panics holding its locks), which
	// a commit would reach when the memtable fills there.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	fault.On() // run 3's commit fails
	if err := pl.Fold(rs[2], rec.settle); err != nil {
		t.Fatalf("Fold of run 3 (its commit runs after): %v", err)
	}
	err = pl.Fold(rs[3], rec.settle)
	var ce *CommitError
	if !errors.As(err, &ce) || ce.seq != 300 || !strings.Contains(err.Error(), "injected error") {
		t.Fatalf("Fold after a failed commit: %v, want the commit of seq ..300 failed", err)
	}
	if err := pl.Fold(rs[4], rec.settle); !errors.As(err, &ce) {
		t.Fatalf("Fold of a stopped pipeline: %v, want the commit error again", err)
	}
	if err := pl.Close(); err != nil {
		t.Fatalf("Close: %v (the failure was reported already)", err)
	}
	if len(rec.settled) != 2 || rec.settled[1].LastSeq != 200 {
		t.Fatalf("settled %+v, want the first two runs only", rec.settled)
	}
	if s.AppliedSeq() != 200 {
		t.Fatalf("checkpoint %d after the failed commit, want 200", s.AppliedSeq())
	}
}
