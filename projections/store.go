package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// Defaults of StoreOptions.
const (
	// The store's memory is about CacheSize + 2 × MemTableSize (see
	// StoreOptions.CacheSize) plus the Go heap. Peak RSS of a process
	// folding the bench mix (ledger bench, memory figure): with 48 + 32
	// MiB, 231 MiB at 1M events but 264 MiB at 9.5M (over the 256 MiB
	// budget); with 32 + 32 MiB, 206 MiB at 1.5M events, at the same fold
	// rate (14.5k events/s direct, on 2 cores). 64 + 64 MiB saved ~10% CPU
	// per event but peaked at 250 MiB by 1M events.
	DefaultMemTableSize uint64 = 32 << 20
	DefaultCacheSize    int64  = 32 << 20
	// memTables is Pebble's MemTableStopWritesThreshold: the most
	// memtables (the mutable one and those waiting to be flushed) before
	// writes stall. Pebble charges them to the block cache.
	memTables = 2
	// valueSeparationMinSize is the smallest value Pebble stores in a blob
	// file (see OpenStore).
	valueSeparationMinSize = 512
	// l0CompactionThreshold is Pebble's L0CompactionThreshold (see
	// OpenStore).
	l0CompactionThreshold = 16
)

// Errors of the store.
var (
	// ErrBatchDone is returned by every use of a batch after Commit, Close
	// or Discard.
	ErrBatchDone = errors.New("projections: batch already committed or closed")
	// ErrStaleCommit is returned by Commit when its sequence is not after
	// the store's checkpoint: committing it would apply events twice.
	ErrStaleCommit = errors.New("projections: commit sequence not after checkpoint")
	// ErrStoreFailed is returned by Commit when Pebble could not write or
	// sync its WAL (a full or failing disk), and by every later Commit:
	// Pebble's commit pipeline is unusable after such an error. Nothing of
	// the failed batch is checkpointed; reads still answer. Close the store
	// and open it again once the cause is gone: the reopened store holds
	// whole batches only, up to its checkpoint.
	ErrStoreFailed = errors.New("projections: store failed writing its WAL; close and reopen it")
	// ErrPending is returned by Handoff while another handed-off batch
	// is still being committed.
	ErrPending = errors.New("projections: another batch is being committed")
	// ErrParentFailed is returned by Commit of a batch that read the
	// writes of a handed-off batch whose commit failed (or that was closed
	// without committing): what it folded rests on writes that are not in
	// the store.
	ErrParentFailed = errors.New("projections: a handed-off batch this one read from was not committed")
)

// StoreOptions configures [OpenStore].
type StoreOptions struct {
	// Dir is the Pebble directory. Required unless FS is set (an in-memory
	// vfs.NewMem() store may use any Dir, including "").
	Dir string
	// FS is the filesystem; nil means the OS filesystem.
	FS vfs.FS
	// MemTableSize is Pebble's memtable size; 0 means DefaultMemTableSize.
	MemTableSize uint64
	// CacheSize is the block cache size; 0 means DefaultCacheSize. Pebble
	// charges its memtables to the block cache, so the cache OpenStore
	// makes holds CacheSize plus room for the memtables: the store's
	// memory is about CacheSize + 2 × MemTableSize, plus 8 MiB for a
	// store opened empty until it has taken 32M writes (writtenFilter).
	CacheSize int64
	// Logger receives Pebble's messages (info at debug level).
	Logger zerolog.Logger
	// NoWAL commits without Pebble's write-ahead log: for a store being
	// rebuilt from the log into a fresh directory (repair.RebuildInto),
	// never for the live projection. A commit is then durable once its
	// memtable is flushed (when it fills, and at Close), not when Commit
	// returns: a crash loses the batches not yet flushed and the
	// checkpoint goes back with them (a batch is applied to one memtable
	// and memtables are flushed in order, so the store still holds whole
	// batches up to its checkpoint), and a rebuild resumes from there.
	// Close returns an error when the final flush fails.
	NoWAL bool
	// BeforeCommit, when set, is called before each commit writes to
	// Pebble; an error refuses the commit (nothing written, the store
	// stays usable) and Commit returns it wrapped. The ledger checks there
	// that its volume still holds what the next WAL file needs: Pebble
	// cannot recover from a WAL it fails to write or close (it panics),
	// so the commit is refused before it gets there.
	BeforeCommit func() error

	// recentCap overrides how many recently committed proposals the store
	// keeps decoded (0: recentCap; negative: none). Tests compare stores
	// folded with and without them.
	recentCap int
	// writtenBits overrides the size of an empty store's written filter
	// (0: writtenFilterBits; negative: none; else a power of two ≥ 64).
	// Tests compare folds with, without and with a filter that fills up.
	writtenBits int
}

// Validate checks the options without touching the disk.
func (o *StoreOptions) Validate() error {
	if o.Dir == "" && o.FS == nil {
		return errors.New("projections: store options: Dir is required (or an FS such as vfs.NewMem())")
	}
	if o.MemTableSize >= 4<<30 {
		return fmt.Errorf("projections: store options: MemTableSize %d must be < 4 GiB", o.MemTableSize)
	}
	if o.CacheSize < 0 {
		return fmt.Errorf("projections: store options: CacheSize %d is negative", o.CacheSize)
	}
	return nil
}

// Store is the Pebble projection (contract §6): proposal records, their history,
// the event-id index, orphan waiting lists, per-space stats, the secondary
// indexes of List, the deadline index of the expirer, and the checkpoint (the
// last applied stream sequence), which is written in the same Pebble batch as
// the changes it caused. The key layout is documented in store_keys.go.
//
// There is one writer at a time (a [Pipeline]: the projector's or a
// rebuild's, through [Store.NewBatch], [Batch.Handoff] and [Batch.Commit]);
// reads are safe for concurrent use with it and with each other, and each
// read sees a consistent point-in-time view of committed state.
type Store struct {
	noWAL bool         // StoreOptions.NoWAL
	guard func() error // StoreOptions.BeforeCommit
	bgErr chan error   // Pebble's latest background error not yet seen (Store.flush)
	db    *pebble.DB
	log   zerolog.Logger

	// mu guards the database's life: held shared by every use of db (reads,
	// commits), exclusively by Close, which sets closed under it.
	mu     sync.RWMutex
	closed bool

	cp      checkpoint  // the applied sequence and its waiters (store_checkpoint.go)
	commits commitState // what commits share: their lock, scratch, failure (batch_commit.go)
	handoff handoff     // the batch handed off and being committed (batch_handoff.go)
	recent  recentCache // proposals as the last commits left them (store_recent.go)

	// written rules out reads of records never written, while the store
	// is young (see writtenFilter); nil once full, or for a store that was
	// not empty when opened. An atomic pointer: batches read it without a
	// lock, a batch drops a full filter, and Close clears it.
	written atomic.Pointer[writtenFilter]
}

// OpenStore opens (creating if needed) the store in o.Dir and loads its
// checkpoint.
func OpenStore(o StoreOptions) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.recentCap == 0 {
		o.recentCap = recentCap
	}
	// Pebble reserves each memtable's size in the block cache: a cache of
	// only CacheSize (it was 128 MiB for two 64 MiB memtables) holds no
	// blocks at all, and every point read of the fold went to disk.
	bgErr := make(chan error, 1) // Pebble's background errors, for Store.flush
	cache := pebble.NewCache(o.CacheSize + memTables*int64(o.MemTableSize))
	defer cache.Unref()
	opts := &pebble.Options{
		FS:                          o.FS,
		Cache:                       cache,
		MemTableSize:                o.MemTableSize,
		MemTableStopWritesThreshold: memTables,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{o.Logger},
		Cleaner:                     walCleaner{}, // no WAL recycling (store_wal.go)
		DisableWAL:                  o.NoWAL,
		EventListener:               &pebble.EventListener{BackgroundError: backgroundError(pebbleLogger{o.Logger}, bgErr)},
	}
	// Most point reads of the fold are for keys that do not exist (a new
	// event id, a target with no orphans): bloom filters make them cheap.
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Proposal records (most of the bytes written, about 1 KiB each and
	// rewritten on every change) go to blob files, written once at flush:
	// compactions then move a reference instead of the value. Measured on
	// the bench's rebuild, this cut compaction work enough to fold 15% more
	// events per second. History entries, event refs and index entries
	// (under 512 bytes) stay in the sstables, where scans read them.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           valueSeparationMinSize,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	// The fold writes keys spread over the whole key space (ids), so
	// every L0 → Lbase compaction rewrites most of Lbase: compacting
	// twice as much L0 at a time halves those rewrites. Paired with the
	// naive baseline on the bench's rebuild, 8 (Pebble's default is 4)
	// took the fold ratio from 1.28 to 1.38; 16 (store format 2) from
	// 41.1k to 44.2k events/s (0.77 → 0.82), with read latencies and the
	// peak RSS of folding 1M events unchanged (docs/performance.md). Reads
	// check up to 16 L0 files' bloom filters instead of 4.
	opts.L0CompactionThreshold = l0CompactionThreshold
	opts.L0StopWritesThreshold = 3 * l0CompactionThreshold
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("projections: open store %q: %w", o.Dir, err)
	}
	if err := checkFormat(db, o.Dir, syncOpts(o.NoWAL)); err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{
		noWAL:   o.NoWAL,
		guard:   o.BeforeCommit,
		bgErr:   bgErr,
		db:      db,
		log:     o.Logger,
		cp:      newCheckpoint(),
		commits: commitState{spaces: map[string]struct{}{}},
		recent:  recentCache{cap: o.recentCap},
	}
	v, closer, err := db.Get(checkpointKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		// Nothing was ever committed: the store is empty.
		switch bits := o.writtenBits; {
		case bits == 0:
			s.written.Store(newWrittenFilter(writtenFilterBits))
		case bits > 0:
			s.written.Store(newWrittenFilter(uint64(bits)))
		}
	case err != nil:
		_ = db.Close()
		return nil, fmt.Errorf("projections: open store %q: read checkpoint: %w", o.Dir, err)
	default:
		if len(v) != 8 {
			_ = closer.Close()
			_ = db.Close()
			return nil, fmt.Errorf("projections: open store %q: checkpoint is %d bytes, want 8", o.Dir, len(v))
		}
		s.cp.seq.Store(binary.BigEndian.Uint64(v))
		_ = closer.Close()
	}
	return s, nil
}

// Close closes the store's Pebble database: reads and commits under way
// finish first (they hold the store's shared lock), and every later use of
// the store or of its batches returns ErrClosed. It does not commit
// anything: a batch not committed is lost, as after a crash. What is
// committed is flushed from the memtables first (unless a commit failed),
// so that no WAL data is left on disk (store_wal.go); for a store without
// a WAL a failed flush is returned (what it held is lost). It is safe to
// call twice (the second call returns nil).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.written.Store(nil) // reads after Close go to Pebble, which refuses them
	s.cp.close()
	s.recent.reset()
	s.commits.buf.close() // no commit runs: they hold mu shared
	ferr := s.flushOnClose()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("projections: close store: %w", err)
	}
	return ferr
}

// acquire takes the shared lock for one use of the database.
func (s *Store) acquire() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) release() { s.mu.RUnlock() }

type pebbleLogger struct{ l zerolog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug().Str("component", "pebble").Msgf(format, args...)
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error().Str("component", "pebble").Msgf(format, args...)
}

// Fatalf panics with a pebbleFatal. Commit recovers the one of a failed
// WAL write (see commitPebble); anywhere else (a background flush or
// compaction that cannot write its MANIFEST) the process stops, as Pebble
// requires.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error().Str("component", "pebble").Msgf(format, args...)
	panic(pebbleFatal{msg: fmt.Sprintf(format, args...)})
}

// pebbleFatal is the panic value of pebbleLogger.Fatalf.
type pebbleFatal struct{ msg string }

func (f pebbleFatal) String() string { return "projections: pebble fatal: " + f.msg }

// ---------------------------------------------------------------------------
