package projections

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// walFiles returns the number of WAL files in dir and the bytes they
// occupy on disk (allocated blocks, as du counts them: preallocation
// included).
func walFiles(t *testing.T, dir string) (n int, bytes int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		n++
		bytes += st.Blocks * 512
	}
	return n, bytes
}

// TestStoreWALBounded writes many memtables' worth through the store's
// database and checks that obsolete WAL files are deleted, not kept for
// recycling, and that a clean Close leaves no WAL data on disk while
// everything written reads back after reopening.
func TestStoreWALBounded(t *testing.T) {
	dir := t.TempDir()
	const memTable = 1 << 20
	open := func() *Store {
		s, err := OpenStore(StoreOptions{Dir: dir, MemTableSize: memTable, CacheSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	val := make([]byte, 4096)
	const keys = 4096 // 16 MiB: 16 memtables
	maxFiles := 0
	for i := range keys {
		var k [9]byte
		k[0] = 'Z'
		binary.BigEndian.PutUint64(k[1:], uint64(i))
		binary.BigEndian.PutUint64(val, uint64(i))
		if err := s.db.Set(k[:], val, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if i%256 == 0 {
			n, _ := walFiles(t, dir)
			maxFiles = max(maxFiles, n)
		}
	}
	// Unflushed memtables (memTables) and one being created; never the
	// MemTableStopWritesThreshold+1 recycled files on top.
	if maxFiles > memTables+1 {
		t.Errorf("up to %d WAL files while writing, want ≤ %d (no recycling)", maxFiles, memTables+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n, bytes := walFiles(t, dir)
	if n > 1 || bytes > 64<<10 {
		t.Errorf("after a clean Close: %d WAL files, %d bytes on disk; want at most one empty file", n, bytes)
	}
	s = open()
	defer s.Close()
	for _, i := range []int{0, keys / 2, keys - 1} {
		var k [9]byte
		k[0] = 'Z'
		binary.BigEndian.PutUint64(k[1:], uint64(i))
		v, closer, err := s.db.Get(k[:])
		if err != nil {
			t.Fatalf("key %d after reopen: %v", i, err)
		}
		if got := binary.BigEndian.Uint64(v); got != uint64(i) {
			t.Errorf("key %d reads %d", i, got)
		}
		_ = closer.Close()
	}
}

// TestNoWALCrashBetweenBatches folds a log into a store without a WAL,
// crashes it (a file system that keeps only what was synced) after
// several memtable flushes and with commits not yet flushed, and checks
// that the reopened store holds whole batches up to its checkpoint (it
// equals a fold of that prefix) and that resuming from the checkpoint
// ends at the same store as one fold of the whole log with a WAL.
func TestNoWALCrashBetweenBatches(t *testing.T) {
	log := mixLog(t, 3000)
	want := foldIntoStore(t, log, 1000, false)
	fs := vfs.NewCrashableMem()
	open := func(fs vfs.FS) *Store {
		s, err := OpenStore(StoreOptions{FS: fs, Dir: "p", NoWAL: true, MemTableSize: 1 << 20, CacheSize: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(fs)
	pl, err := NewPipeline(s, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range runs(log[:2500], 0, 100) {
		if err := pl.Fold(run, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = s.Close()

	s = open(crashed)
	defer s.Close()
	cp := s.AppliedSeq()
	t.Logf("2500 events folded, %d survived the crash", cp)
	if cp == 0 || cp >= 2500 || cp%100 != 0 {
		t.Fatalf("checkpoint %d after the crash: want a batch boundary, after a flush and before the last commit", cp)
	}
	if got, prefix := dumpStore(t, s), foldIntoStore(t, log[:cp], 1000, false); got != prefix {
		t.Fatalf("the crashed store at checkpoint %d differs from a fold of the log up to it", cp)
	}
	pl, err = NewPipeline(s, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range runs(log[cp:], 0, 100) {
		if err := pl.Fold(run, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dumpStore(t, s); got != want {
		t.Fatal("resumed after the crash, the store differs from one fold of the log")
	}
}

// TestCloseFlushFailing: the disk refuses new table files after the last
// commit (a full disk). Pebble retries a failed flush for ever, so Close
// must not wait for one: it returns, with an error for a store without a
// WAL (what was not flushed is lost) and without one for a store with a
// WAL (replayed at the next open).
func TestCloseFlushFailing(t *testing.T) {
	for _, noWAL := range []bool{false, true} {
		t.Run(map[bool]string{false: "wal", true: "nowal"}[noWAL], func(t *testing.T) {
			log := mixLog(t, 300)
			fault := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
				if (strings.HasSuffix(op.Path, ".sst") || strings.HasSuffix(op.Path, ".blob")) && op.Kind == errorfs.OpCreate {
					return errorfs.ErrInjected
				}
				return nil
			})}
			s, err := OpenStore(StoreOptions{FS: errorfs.Wrap(vfs.NewMem(), fault), NoWAL: noWAL, MemTableSize: 4 << 20, CacheSize: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			pl, err := NewPipeline(s, PipelineOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range runs(log, 0, 100) {
				if err := pl.Fold(run, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := pl.Close(); err != nil {
				t.Fatal(err)
			}
			fault.On()
			err = s.Close()
			switch {
			case noWAL && (err == nil || !strings.Contains(err.Error(), "flush")):
				t.Fatalf("Close of a store without a WAL whose flush fails: %v, want the flush's error", err)
			case !noWAL && err != nil:
				t.Fatalf("Close of a store with a WAL whose flush fails: %v, want nil (the WAL is replayed)", err)
			}
		})
	}
}
