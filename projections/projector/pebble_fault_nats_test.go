package projector_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// walFault fails the projection's WAL once switched on: every write and
// sync of a .log file (failWrites), or only the syncs (the bytes reach the
// page cache, the fsync says the disk is gone).
func walFault(failWrites bool) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return errorfs.ErrInjected
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate:
			if failWrites {
				return errorfs.ErrInjected
			}
		}
		return nil
	})}
}

var throughSeq = regexp.MustCompile(`commit through seq (\d+)`)

// failedSeqNamed reports whether err names the end of the batch after good.
func failedSeqNamed(err error, good uint64, batch int) bool {
	m := throughSeq.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n > good && n <= good+uint64(batch)
}

// TestPebbleWriteErrorStopsProjectorCleanly: the projection's disk fails
// (WAL writes, or only fsyncs) in the middle of a run. The projector stops
// with an error naming the sequence it could not commit — no panic, no
// process exit. Pebble's failed WAL is sticky, so the store is closed and
// reopened on a healthy filesystem: its checkpoint and contents equal a
// rebuild up to that checkpoint (never half a batch), and a new projector
// resumes from it to a projection equal to a full rebuild.
func TestPebbleWriteErrorStopsProjectorCleanly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failWrites bool
	}{{"wal-write", true}, {"wal-fsync", false}} {
		t.Run(tc.name, func(t *testing.T) {
			const batch = 100
			r := newFastRig(t)
			g := workload.New(workload.Options{Seed: 31, Disorder: 10, Duplicates: 3, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
			last := r.appendAll(t, g.Batch(1500))
			dir := filepath.Join(t.TempDir(), "projection")

			fault := walFault(tc.failWrites)
			s, err := projections.OpenStore(projections.StoreOptions{Dir: dir, FS: errorfs.Wrap(vfs.Default, fault)})
			if err != nil {
				t.Fatal(err)
			}
			var goodSeq atomic.Uint64
			p, err := projector.New(r.js, s, projector.Options{BatchSize: batch, OnBatch: func(b projections.BatchInfo) {
				// After a few commits the disk goes: the next commit fails.
				// Not next to a memtable rotation (this run's, in store
				// format 2, come near seq 480 and 1250): Pebble panics
				// when it cannot close the old WAL there, which no caller
				// can recover from (rotateWAL).
				if b.LastSeq >= 800 && goodSeq.Load() == 0 {
					goodSeq.Store(b.LastSeq)
					fault.On()
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(testctx.Whole(t))
			defer cancel()
			var runErr error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("the projector panicked on a disk error: %v", v)
					}
				}()
				runErr = p.Run(ctx)
			}()
			good := goodSeq.Load()
			switch {
			case ctx.Err() != nil:
				t.Fatalf("the projector did not stop on the disk error (at seq %d)", s.AppliedSeq())
			case runErr == nil:
				t.Fatal("Run returned nil after a disk error")
			case !strings.Contains(runErr.Error(), "injected error"):
				t.Fatalf("Run: %v; want the disk's error", runErr)
			case !failedSeqNamed(runErr, good, batch):
				t.Fatalf("Run: %v; want the sequence it could not commit (after %d)", runErr, good)
			case s.AppliedSeq() != good:
				t.Fatalf("checkpoint %d after the failure, want %d (the last good commit)", s.AppliedSeq(), good)
			}
			t.Logf("Run: %v", runErr)

			// The store refuses further commits rather than pretend.
			b := s.NewBatch()
			_ = b.PutStats("probe", api.NewStats())
			if err := b.Commit(good + 1); err == nil {
				t.Fatal("a commit on the failed store succeeded")
			} else if !errors.Is(err, projections.ErrStoreFailed) {
				t.Errorf("commit on the failed store: %v; want ErrStoreFailed", err)
			}
			if _, err := s.Stats("default"); err != nil {
				t.Errorf("reads on the failed store: %v", err)
			}
			fault.Off()
			if err := s.Close(); err != nil {
				t.Logf("close of the failed store: %v", err)
			}

			// Reopen on a healthy filesystem: a whole number of batches.
			s2 := openStore(t, dir)
			cp := s2.AppliedSeq()
			if cp != good && (tc.failWrites || cp > good+batch) {
				t.Fatalf("reopened at checkpoint %d, want %d (or, when only the fsync failed, the failed batch's end)", cp, good)
			}
			ref := openStore(t, filepath.Join(t.TempDir(), "ref"))
			if _, err := projector.Rebuild(ctx, r.js, ref, projector.RebuildOptions{UpToSeq: cp}); err != nil {
				t.Fatal(err)
			}
			if d, err := projections.Compare(s2, ref); err != nil || d != nil {
				t.Fatalf("reopened store is not the fold up to its checkpoint %d: %v %v", cp, err, d)
			}

			// The cause gone, a new projector resumes from the checkpoint.
			last = max(last, r.appendAll(t, g.Batch(500)))
			stop := runProjector(t, r.js, s2, projector.Options{BatchSize: batch})
			waitApplied(t, s2, last)
			stop()
			if d, err := projections.Compare(s2, rebuildInto(t, r.js)); err != nil || d != nil {
				t.Fatalf("after resuming: %v %v", err, d)
			}
			t.Logf("failed after seq %d, reopened at %d, resumed to %d equal to a rebuild", good, cp, last)
		})
	}
}
