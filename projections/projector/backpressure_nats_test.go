package projector_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// reader reads the store in a loop until stop: Get of known proposals,
// List and Stats. Every read must answer, and never show an event more
// than one commit (slack events) beyond the checkpoint read after it:
// Pebble makes a synced batch visible before its WAL fsync returns, so
// for the length of an fsync a read may see the commit in flight before
// the store's checkpoint says it is applied.
type reader struct {
	reads, found atomic.Int64
	errs         chan error
}

func startReader(s *projections.Store, ids []string, slack uint64, stop <-chan struct{}, wg *sync.WaitGroup) *reader {
	r := &reader{errs: make(chan error, 1)}
	fail := func(err error) {
		select {
		case r.errs <- err:
		default:
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p, err := s.Get(ledger.DefaultSpace, ids[i%len(ids)])
			switch {
			case errors.Is(err, projections.ErrNotFound):
			case err != nil:
				fail(err)
				return
			default:
				r.found.Add(1)
				if applied := s.AppliedSeq(); p.UpdatedSeq > applied+slack {
					fail(fmt.Errorf("a read shows seq %d, more than a commit beyond the checkpoint %d", p.UpdatedSeq, applied))
					return
				}
			}
			if i%20 == 0 {
				if _, err := s.List(projections.ListQuery{Space: ledger.DefaultSpace, Limit: 50}); err != nil {
					fail(err)
					return
				}
				if _, err := s.Stats(ledger.DefaultSpace); err != nil {
					fail(err)
					return
				}
			}
			r.reads.Add(1)
		}
	}()
	return r
}

// TestBackpressurePausedProjector: the projector is paused (idle, caught
// up) while appends go on. The checkpoint does not move, reads keep
// answering from the last commit, and after Resume the projector catches
// up to a projection equal to a rebuild.
func TestBackpressurePausedProjector(t *testing.T) {
	const batch = 50
	r := newFastRig(t)
	s := openStore(t, t.TempDir())
	p, err := projector.New(r.js, s, projector.Options{BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("projector: %v", err)
		}
	}()

	g := workload.New(workload.Options{Seed: 5, Disorder: 5, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	waitApplied(t, s, r.appendAll(t, g.Batch(500)))

	p.Pause()
	paused := s.AppliedSeq()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	rd := startReader(s, g.Proposals(), batch, stop, &wg)
	var last uint64
	maxApplied := paused
	for range 6 {
		last = r.appendAll(t, g.Batch(500))
		maxApplied = max(maxApplied, s.AppliedSeq())
	}
	// Reads answered all along; let them run over the lagging store a bit
	// longer, then stop them.
	for rd.reads.Load() < 2000 {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-rd.errs:
		t.Fatalf("read during the pause: %v", err)
	default:
	}
	maxApplied = max(maxApplied, s.AppliedSeq())
	if maxApplied != paused {
		t.Fatalf("paused (idle) at seq %d, yet the checkpoint reached %d", paused, maxApplied)
	}
	lag := last - s.AppliedSeq()
	if lag != 3000 {
		t.Fatalf("lag %d after 3000 appends while paused", lag)
	}

	p.Resume()
	waitApplied(t, s, last)
	if d, err := projections.Compare(s, rebuildInto(t, r.js)); err != nil || d != nil {
		t.Fatalf("after catching up: %v %v", err, d)
	}
	t.Logf("paused at seq %d, %d appends meanwhile (lag %d), %d reads answered (%d found), caught up to %d",
		paused, last-paused, lag, rd.reads.Load(), rd.found.Load(), last)
}

// TestBackpressureSlowPebble: every WAL sync of the projection takes 15ms
// (a slow disk) while appends go on: the projector lags and commits bigger
// batches, reads keep answering, and it ends equal to a rebuild.
func TestBackpressureSlowPebble(t *testing.T) {
	slow := errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			time.Sleep(15 * time.Millisecond)
		}
		return nil
	})
	r := newFastRig(t)
	s, err := projections.OpenStore(projections.StoreOptions{Dir: t.TempDir(), FS: errorfs.Wrap(vfs.Default, slow)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var batches, biggest atomic.Int64
	stopP := runProjector(t, r.js, s, projector.Options{BatchSize: 200, OnBatch: func(b projections.BatchInfo) {
		batches.Add(1)
		if int64(b.Events) > biggest.Load() {
			biggest.Store(int64(b.Events))
		}
	}})
	g := workload.New(workload.Options{Seed: 9, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10}})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	first := g.Batch(100)
	waitApplied(t, s, r.appendAll(t, first))
	rd := startReader(s, g.Proposals(), 200, stop, &wg)
	var last uint64
	var maxLag uint64
	for range 10 {
		last = r.appendAll(t, g.Batch(300))
		maxLag = max(maxLag, last-s.AppliedSeq())
	}
	waitApplied(t, s, last)
	close(stop)
	wg.Wait()
	stopP()
	select {
	case err := <-rd.errs:
		t.Fatalf("read while the projector lagged: %v", err)
	default:
	}
	if d, err := projections.Compare(s, rebuildInto(t, r.js)); err != nil || d != nil {
		t.Fatalf("after catching up: %v %v", err, d)
	}
	t.Logf("%d events in %d commits (largest %d events), max lag seen %d, %d reads answered", last, batches.Load(), biggest.Load(), maxLag, rd.reads.Load())
}
