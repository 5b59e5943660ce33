package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mewledger/ledger/projections"
)

// The ledger's own files on a volume of any size (issue 36 item 1).
//
// The projection's Pebble allocates each write-ahead-log file 1.1 × its
// memtable size when the file's first record is written, and holds at
// most two of them (store_wal.go): with the default 32 MiB memtable, 71
// MiB, more than a 64 MiB volume has and most of a 256 MiB one. So the
// memtable is sized by the volume the data directory is on: a sixteenth
// of it, between minMemTable and projections.DefaultMemTableSize (4 MiB
// on 64 MiB, 16 MiB on 256 MiB, 32 MiB from 512 MiB on). The WAL then
// takes at most 2 × 1.1 × memtable: 14% of the volume, 71 MiB at most.
//
// What the ledger needs free to make progress (diskNeed) is one more WAL
// file (the next memtable's) plus room for JetStream's writes in flight
// (jsWriteRoom). The storage watch declares the disk full under DiskLowFree
// (default: diskNeed), before Pebble meets the full disk: JetStream is
// refused while the projection can still fold everything stored. It
// resumes once DiskResumeFree is free (default: DiskLowFree + a quarter,
// at least 1 MiB) and a probe file of that size can be allocated on the
// store's file system (a quota or a memory limit may refuse writes while
// statfs shows free space): the threshold is what the ledger itself needs,
// not a fixed size, so it is reached on any volume the ledger fits on.

const (
	// minMemTable is the smallest memtable the volume sizing picks.
	minMemTable uint64 = 4 << 20
	// jsWriteRoom is the room kept for JetStream's writes in flight (its
	// message block cache is flushed in pieces of at most a few MiB).
	jsWriteRoom uint64 = 2 << 20
	// probeName is the probe file the watch allocates in the store's
	// directory before resuming.
	probeName = ".ledger-space-probe"
)

// diskBudget is the sizing of the ledger's own files on its volume.
type diskBudget struct {
	volume   uint64 // bytes of the data directory's file system (0: unknown)
	memTable uint64 // the projection's memtable size
	low      uint64 // under this free, the disk is full
	resume   uint64 // at least this free (and a probe that fits) to resume
}

// walFile is the allocation of one WAL file of a memtable of m bytes.
func walFile(m uint64) uint64 { return m + m/10 }

// memTableFor returns the memtable size for a volume of size bytes.
func memTableFor(size uint64) uint64 {
	if size == 0 {
		return projections.DefaultMemTableSize
	}
	m := (size / 16) &^ (1<<20 - 1)
	return min(max(m, minMemTable), projections.DefaultMemTableSize)
}

// newDiskBudget sizes the ledger's files for the volume of dir, with the
// thresholds of o where set.
func newDiskBudget(dir string, o Options) diskBudget {
	var b diskBudget
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		b.volume = st.Blocks * uint64(st.Bsize)
	}
	b.memTable = memTableFor(b.volume)
	b.low = walFile(b.memTable) + jsWriteRoom
	if o.DiskLowFree > 0 {
		b.low = uint64(o.DiskLowFree)
	}
	b.resume = b.low + max(b.low/4, 1<<20)
	if o.DiskResumeFree > 0 {
		b.resume = max(uint64(o.DiskResumeFree), b.low)
	}
	return b
}

// probeSpace allocates n bytes in a probe file in dir and removes it:
// nil when they fit. A file system that cannot preallocate is taken at
// its word (statfs).
func probeSpace(dir string, n uint64) error {
	path := filepath.Join(dir, probeName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("app: space probe: %w", err)
	}
	err = syscall.Fallocate(int(f.Fd()), 0, 0, int64(n))
	_ = f.Close()
	_ = os.Remove(path)
	if err != nil && !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOSYS) {
		return fmt.Errorf("app: space probe of %d bytes in %s: %w", n, dir, err)
	}
	return nil
}

// projectionRoom is the projection's BeforeCommit: a commit is refused
// (ENOSPC, before Pebble writes) when the projection's volume no longer
// holds the next WAL file and a MiB of tables. The projector then stops
// and the storage watch reopens the store once space is back
// (pipelineFailed).
func (a *App) projectionRoom() error {
	need := walFile(a.disk.memTable) + 1<<20
	free, err := freeBytes(a.opts.ProjectionDir())
	if err != nil || free >= need {
		return nil
	}
	return fmt.Errorf("app: %d bytes free for the projection in %s, under the %d its next WAL file needs: %w", free, a.opts.ProjectionDir(), need, syscall.ENOSPC)
}
