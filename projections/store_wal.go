package projections

import (
	"fmt"

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
// stop: 88–148 MB of a 100,000-event store's 232–301 MB.
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
// Not recycling costs nothing measurable on the fold (docs/performance.md).

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
// whose commits failed (a full or failing disk) is closed without it. For
// a store without a WAL (StoreOptions.NoWAL) the flush is what makes its
// last commits durable: its failure is returned.
func (s *Store) flushOnClose() error {
	if s.commits.failed != nil {
		return nil
	}
	err := s.flush()
	switch {
	case err == nil:
		return nil
	case s.noWAL:
		return fmt.Errorf("projections: close store: flush (a store without a WAL loses what was not flushed): %w", err)
	}
	s.log.Warn().Err(err).Msg("projections: flush on close failed (the WAL is replayed at the next open)")
	return nil
}

// Flush writes the memtables to sstables and waits for it: what was
// committed is then durable for a store without a WAL (StoreOptions.NoWAL),
// and takes no WAL space for one with it. Close does the same.
func (s *Store) Flush() error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	if err := s.flush(); err != nil {
		return fmt.Errorf("projections: flush: %w", err)
	}
	return nil
}

// flush flushes the memtables and waits until they are flushed or Pebble
// reports a background error. Pebble retries a failed flush (a full disk)
// at once and for ever, and DB.Flush waits for its success: waiting on the
// error as well is what lets Close go on (Pebble stops retrying once
// closed). The caller holds mu.
func (s *Store) flush() error {
	for drained := false; !drained; { // errors of before this flush
		select {
		case <-s.bgErr:
		default:
			drained = true
		}
	}
	done, err := s.db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case err := <-s.bgErr:
		return err
	}
}

// backgroundError is Pebble's EventListener.BackgroundError: a failed
// flush or compaction, logged as Pebble's default does and kept (one at a
// time) for a flush waiting on it.
func backgroundError(log pebble.Logger, ch chan error) func(error) {
	return func(err error) {
		log.Errorf("background error: %s", err)
		select {
		case ch <- err:
		default: // one is waiting already
		}
	}
}

// sync is the write option of the store's durable writes: pebble.Sync, or
// pebble.NoSync for a store without a WAL (Pebble refuses a synced write
// there; what makes it durable is the next flush).
func (s *Store) sync() *pebble.WriteOptions { return syncOpts(s.noWAL) }

func syncOpts(noWAL bool) *pebble.WriteOptions {
	if noWAL {
		return pebble.NoSync
	}
	return pebble.Sync
}
