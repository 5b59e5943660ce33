package projections

import (
	"github.com/cockroachdb/pebble/v2"
)

// The store's write-ahead log on disk.
//
// Pebble writes one WAL file per memtable, preallocated to 1.1 ×
// MemTableSize when its first record is written, and by default keeps up
// to MemTableStopWritesThreshold + 1 obsolete WAL files for reuse
// (recycling: syncing a file already written costs less metadata than a
// new one). With the store's two 32 MiB memtables that is up to three
// 35 MiB files kept beside the live ones, still on disk after a clean
// stop: 88 MB of a 100,000-event store's 232 MB.
//
// The store recycles none (walCleaner) and flushes its memtable on a
// clean Close (Store.Close), so that:
//
//   - while it runs, the WAL files are those of the memtables not yet
//     flushed: at most memTables of them, each ≤ 1.1 × MemTableSize
//     allocated (70 MiB with the defaults), and the rest of the store is
//     its sstables and blob files;
//   - after a clean stop, one empty WAL file is left (no data blocks).
//
// Recycling was measured against not recycling on the fold
// (docs/performance.md): a fresh WAL file costs nothing measurable here,
// because every commit is one synced write and the file is preallocated.

// walCleaner deletes obsolete files as Pebble's DeleteCleaner does (its
// Clean, promoted from depth 1) and tells Pebble not to recycle WAL files:
// Pebble recycles none for a cleaner that needs the files' contents
// (base.NeedsFileContents, promoted from the ArchiveCleaner at depth 2,
// whose Clean is shadowed) and deletes them instead.
type walCleaner struct {
	pebble.DeleteCleaner
	noRecycle
}

type noRecycle struct{ pebble.ArchiveCleaner }

// flushOnClose flushes the memtables before a clean Close, so that the
// WAL files they hold become obsolete and are deleted (see above). A store
// whose commits failed (a full or failing disk) is closed without it.
func (s *Store) flushOnClose() {
	if s.commits.failed != nil {
		return
	}
	if err := s.db.Flush(); err != nil {
		s.log.Warn().Err(err).Msg("projections: flush on close (the WAL is replayed at the next open)")
	}
}
