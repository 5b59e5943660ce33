package projections

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
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
	l0CompactionThreshold = 8
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

// Store is the Pebble projection (SPEC §6): proposal records, their history,
// the event-id index, orphan waiting lists, per-space stats, the secondary
// indexes of List, the deadline index of the expirer, and the checkpoint (the
// last applied stream sequence), which is written in the same Pebble batch as
// the changes it caused. The key layout is documented in store_keys.go.
//
// There is one writer (the projector, through [Store.NewBatch] and
// [Batch.Commit]); reads are safe for concurrent use with it and with each
// other, and each read sees a consistent point-in-time view.
type Store struct {
	db  *pebble.DB
	log zerolog.Logger

	// mu is held shared by every use of db and exclusively by Close.
	mu     sync.RWMutex
	closed bool

	applied  atomic.Uint64
	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced on every commit
	done     chan struct{} // closed by Close

	writeMu sync.Mutex // serialises commits
	cbuf    commitBuf  // Commit's scratch, under writeMu
	spaces  map[string]struct{}

	// recent holds the proposals written by the last commits, as
	// committed, up to recentCap of them (the oldest writes go first): the
	// writer's next batches read them from here instead of Pebble.
	// Follow-up events mostly name recent proposals, and the projector's
	// batches are small when it keeps up (a batch is what arrived since the
	// last one). Values are never modified (the fold puts modified copies).
	// Kernel proposals are not kept.
	recentMu    sync.Mutex
	recent      map[spaceID]recentProposal
	recentOrder []recentKey // writes, oldest first
	recentGen   uint64
	recentCap   int
	failed      error // set (under writeMu) when a commit hit a Pebble fatal error

	// pending is the batch handed off for commit (Handoff) and not yet
	// committed: writable batches read its writes before Pebble's. Its
	// overlay is not changed while it is pending (Handoff freezes it),
	// and it stops being pending, under pendMu, before Commit or Close
	// releases it.
	pendMu  sync.RWMutex
	pending *Batch

	// written rules out reads of records never written, while the store
	// is young (see writtenFilter); nil once full, or for a store that was
	// not empty when opened.
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
	cache := pebble.NewCache(o.CacheSize + memTables*int64(o.MemTableSize))
	defer cache.Unref()
	opts := &pebble.Options{
		FS:                          o.FS,
		Cache:                       cache,
		MemTableSize:                o.MemTableSize,
		MemTableStopWritesThreshold: memTables,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{o.Logger},
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
	// took the fold ratio from 1.28 to 1.38. Reads check up to 8 L0 files'
	// bloom filters instead of 4.
	opts.L0CompactionThreshold = l0CompactionThreshold
	opts.L0StopWritesThreshold = 3 * l0CompactionThreshold
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("projections: open store %q: %w", o.Dir, err)
	}
	s := &Store{
		db:     db,
		log:    o.Logger,
		notify: make(chan struct{}),
		done:   make(chan struct{}),
		spaces: map[string]struct{}{},

		recentCap: o.recentCap,
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
		s.applied.Store(binary.BigEndian.Uint64(v))
		_ = closer.Close()
	}
	return s, nil
}

// Close closes the store's Pebble database: reads and commits under way
// finish first (they hold the store's shared lock), and every later use of
// the store or of its batches returns ErrClosed. It does not commit
// anything: a batch not committed is lost, as after a crash. It is safe to
// call twice (the second call returns nil).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.written.Store(nil) // reads after Close go to Pebble, which refuses them
	close(s.done)
	s.recentMu.Lock()
	s.recent, s.recentOrder = nil, nil
	s.recentMu.Unlock()
	s.cbuf.close() // no commit runs: they hold mu shared
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("projections: close store: %w", err)
	}
	return nil
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

// AppliedSeq returns the checkpoint: the last stream sequence whose effects
// are committed.
func (s *Store) AppliedSeq() uint64 { return s.applied.Load() }

// WaitApplied blocks until AppliedSeq() >= seq. It returns ctx's error
// (wrapped) when ctx is done first, and ErrClosed when the store closes.
func (s *Store) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		s.notifyMu.Lock()
		ch := s.notify
		s.notifyMu.Unlock()
		// Checked after taking ch: a commit that lands in between closes ch.
		if s.applied.Load() >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-s.done:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("projections: wait for seq %d (applied %d): %w", seq, s.applied.Load(), ctx.Err())
		}
	}
}

func (s *Store) published(seq uint64) {
	s.applied.Store(seq)
	s.notifyMu.Lock()
	close(s.notify)
	s.notify = make(chan struct{})
	s.notifyMu.Unlock()
}

// getJSON reads key from r into v; found is false when the key is absent.
func getJSON(r pebble.Reader, key []byte, v any) (found bool, err error) {
	val, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := json.Unmarshal(val, v); err != nil {
		return true, fmt.Errorf("decode %q: %w", key, err)
	}
	return true, nil
}

// Get returns the proposal id of space, or an error wrapping ErrNotFound.
func (s *Store) Get(space, id string) (*Proposal, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	var p Proposal
	found, err := getJSON(s.db, proposalKey(space, id), &p)
	if err != nil {
		return nil, fmt.Errorf("projections: get proposal %q in space %q: %w", id, space, err)
	}
	if !found {
		return nil, fmt.Errorf("projections: proposal %q in space %q: %w", id, space, ErrNotFound)
	}
	return &p, nil
}

// GetRaw is Get without decoding: the stored JSON of the proposal, which is
// exactly json.Marshal of the *Proposal Get returns.
func (s *Store) GetRaw(space, id string) (json.RawMessage, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	v, closer, err := s.db.Get(proposalKey(space, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("projections: proposal %q in space %q: %w", id, space, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("projections: get proposal %q in space %q: %w", id, space, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// History returns the history entries filed under key (a proposal id, or the
// id an orphan or unattributable event was filed under) in sequence order,
// or an error wrapping ErrNotFound when there are none.
func (s *Store) History(space, key string) ([]HistoryEntry, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	prefix := historyPrefix(space, key)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: history of %q in space %q: %w", key, space, err)
	}
	var out []HistoryEntry
	for ok := it.First(); ok; ok = it.Next() {
		var h HistoryEntry
		if err := json.Unmarshal(it.Value(), &h); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("projections: history of %q in space %q: decode seq %d: %w",
				key, space, binary.BigEndian.Uint64(it.Key()[len(prefix):]), err)
		}
		out = append(out, h)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: history of %q in space %q: %w", key, space, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("projections: history of %q in space %q: %w", key, space, ErrNotFound)
	}
	return out, nil
}

// Stats returns the counters of space; NewStats() when it has none.
func (s *Store) Stats(space string) (*Stats, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	st := NewStats()
	if _, err := getJSON(s.db, statsKey(space), st); err != nil {
		return nil, fmt.Errorf("projections: stats of space %q: %w", space, err)
	}
	return st, nil
}

// Spaces returns the spaces that have any data, sorted.
func (s *Store) Spaces() ([]string, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	prefix := []byte{tagSpace}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: spaces: %w", err)
	}
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		sp, rest, err := readEsc(it.Key()[1:])
		if err != nil || len(rest) != 0 {
			_ = it.Close()
			return nil, fmt.Errorf("projections: spaces: key %q: %w", it.Key(), errBadKey)
		}
		out = append(out, sp)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: spaces: %w", err)
	}
	sort.Strings(out) // already in order (the escape preserves it); cheap insurance
	return out, nil
}

// Due is a pending proposal whose deadline has passed.
type Due struct {
	Space    string
	ID       string
	Deadline time.Time
}

// DueExpiries returns up to limit (<= 0 means 1000) pending proposals whose
// expires_at is at or before now, earliest deadline first. The index holds
// only pending proposals with a deadline, so the expirer never scans others.
func (s *Store) DueExpiries(now time.Time, limit int) ([]Due, error) {
	return s.DueExpiriesAfter(now, nil, limit)
}

// Metrics returns Pebble's metrics of the store (diagnostics and
// benchmarks: write volume, compactions, cache). It is safe for concurrent
// use; it returns ErrClosed after Close.
func (s *Store) Metrics() (*pebble.Metrics, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	return s.db.Metrics(), nil
}

// Dump writes every key/value of the store in key order, one pair a line,
// as two Go-quoted strings separated by a space. Only the meta keys
// (store_meta.go) are left out: every other key, the checkpoint included,
// is a pure function of the log up to the checkpoint, so a rebuild and
// the live projection dump byte-for-byte equal.
func (s *Store) Dump(w io.Writer) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: metaLowerBound}) // not the meta keys (store_meta.go)
	if err != nil {
		return fmt.Errorf("projections: dump: %w", err)
	}
	var line []byte
	for ok := it.First(); ok; ok = it.Next() {
		line = strconv.AppendQuote(line[:0], string(it.Key()))
		line = append(line, ' ')
		line = strconv.AppendQuote(line, string(it.Value()))
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			_ = it.Close()
			return fmt.Errorf("projections: dump: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("projections: dump: %w", err)
	}
	return nil
}

// Digest returns the hex SHA-256 of what Dump writes.
func (s *Store) Digest() (string, error) {
	h := sha256.New()
	if err := s.Dump(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pebbleLogger sends Pebble's messages to zerolog.
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
// The batch overlay.

type spaceID struct{ space, id string }

type historyID struct {
	space, key string
	seq        uint64
}

type propSlot struct {
	orig      *Proposal // the version in Pebble (nil: none), valid when origKnown
	origKnown bool
	cur       *Proposal
	dirty     bool
}

type refSlot struct {
	cur   *EventRef
	dirty bool
}

type orphanSlot struct {
	cur   []Orphan
	dirty bool
}

type statsSlot struct {
	cur   *Stats
	dirty bool
	owned bool // cur is the batch's private copy (MutableStats)
}

// Batch is a write overlay over the store implementing [State]: reads see
// the overlay first (read-your-writes), then Pebble; writes stay in memory
// until Commit. The first read of a record from Pebble is remembered, so a
// record is read from Pebble at most once per batch, and absence is
// remembered too.
//
// Put methods take ownership of what they are given: the caller must not
// modify it afterwards. Getters return the overlay's own value, which the
// caller must clone before modifying (see [State]).
//
// A batch is single-use and not safe for concurrent use. Commit, Close or
// Discard ends it; every later use returns ErrBatchDone.
type Batch struct {
	s        *Store
	done     bool

	props   map[spaceID]*propSlot
	refs    map[spaceID]*refSlot
	orphans map[spaceID]*orphanSlot
	aux     map[auxID]*auxSlot
	stats   map[string]*statsSlot
	history map[historyID]*HistoryEntry // nil value: delete
	spaces  map[string]struct{}
	dirty   int

	// The change index (store_changes.go).
	changes map[changeID]*Change

	// Pipelined commits (Handoff). frozen: b was handed off; its owner
	// may no longer change it. committed is closed when its Commit (or
	// Close) ends, commitErr (set before) says how. parents are the
	// handed-off batches b read writes from.
	frozen    bool
	committed chan struct{}
	commitErr error
	parents   []*Batch
}

func newBatch(s *Store) *Batch { return newBatchSized(s, 0) }

// newBatchSized is newBatch with room for the records of about events
// events (a rebuild's batches are large: growing the maps was measurable).
func newBatchSized(s *Store, events int) *Batch {
	return &Batch{
		s:       s,
		props:   make(map[spaceID]*propSlot, events),
		refs:    make(map[spaceID]*refSlot, events),
		orphans: map[spaceID]*orphanSlot{},
		aux:     make(map[auxID]*auxSlot, events),
		stats:   map[string]*statsSlot{},
		history: make(map[historyID]*HistoryEntry, events),
		spaces:  map[string]struct{}{},
	}
}

// NewBatch returns an empty write overlay over the store's latest state,
// including a handed-off batch's writes (see [Batch.Handoff]); a batch made
// while one is pending commits only after it, and only if it committed.
func (s *Store) NewBatch() *Batch { return s.newBatchFor(0) }

// newBatchFor is NewBatch sized for about events events.
func (s *Store) newBatchFor(events int) *Batch {
	b := newBatchSized(s, events)
	b.tieToPending()
	return b
}

// Len returns the number of dirty records in the overlay (proposals, event
// refs, orphan lists, stats and history entries), to bound batch sizes.
func (b *Batch) Len() int { return b.dirty }

// read runs f against the store's database under its shared lock.
func (b *Batch) read(f func(r pebble.Reader) error) error {
	if b.ended() {
		return ErrBatchDone
	}
	if err := b.s.acquire(); err != nil {
		return err
	}
	defer b.s.release()
	return f(b.s.db)
}

func (b *Batch) check() error {
	if b.ended() {
		return ErrBatchDone
	}
	return nil
}

// ended reports whether b may no longer be used by its owner: committed,
// closed, or handed off (its reads would change an overlay that later
// batches are reading).
func (b *Batch) ended() bool { return b.done || b.frozen }

// Handoff freezes b and makes it the store's pending batch, so that its
// Commit can run on another goroutine while the next batch is folded:
// writable batches (NewBatch) read b's writes as if they were committed,
// until b's Commit ends. The caller must then call b.Commit (from any
// goroutine) or b.Close; after Handoff every other use of b returns
// ErrBatchDone. A batch that read from b waits, in its own Commit, for
// b's to end, and fails with ErrParentFailed if b was not committed.
// The store's own reads (Get, List, ...) see only committed state.
//
// Only one batch is pending at a time: Handoff returns ErrPending while
// another one is. It returns ErrBatchDone for an ended batch.
func (b *Batch) Handoff() error {
	if err := b.check(); err != nil {
		return err
	}
	s := b.s
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	if s.pending != nil {
		return ErrPending
	}
	b.frozen = true
	b.committed = make(chan struct{})
	s.pending = b
	return nil
}

// endPending ends b's time as the pending batch, with err as its outcome
// (nil: committed). It is a no-op for a batch that was not handed off or
// has already ended.
func (b *Batch) endPending(err error) {
	if b.committed == nil {
		return
	}
	s := b.s
	s.pendMu.Lock()
	if s.pending == b {
		s.pending = nil
		b.commitErr = err
		close(b.committed)
	}
	s.pendMu.Unlock()
}

// fromPending runs f on the pending batch, if there is one that b may read
// through, under the shared side of pendMu; when f reports that it found
// the record there, the pending batch becomes one of b's parents.
func (b *Batch) fromPending(f func(p *Batch) bool) bool {
	if b.ended() {
		return false
	}
	s := b.s
	s.pendMu.RLock()
	defer s.pendMu.RUnlock()
	p := s.pending
	if p == nil || p == b || !f(p) {
		return false
	}
	if !slices.Contains(b.parents, p) {
		b.parents = append(b.parents, p)
	}
	return true
}

// wrote reports whether the pending batch p wrote the record that
// prefetch would read as (kind, k); prefetch leaves those to the read
// methods, which take them from the pending batch. The caller holds
// pendMu shared and p is the store's pending batch.
func (p *Batch) wrote(kind int, k spaceID) bool {
	switch kind {
	case preProposal:
		sl, ok := p.props[k]
		return ok && sl.dirty
	case preRef:
		sl, ok := p.refs[k]
		return ok && sl.dirty
	case preFiled:
		sl, ok := p.aux[auxID{tagFiled, k.space, k.id}]
		return ok && sl.dirty
	}
	return false
}

// tieToPending makes the pending batch, if any, one of b's parents,
// whether or not b reads anything it wrote: b's commit must follow it and
// must not land if it did not.
func (b *Batch) tieToPending() {
	s := b.s
	s.pendMu.RLock()
	defer s.pendMu.RUnlock()
	if p := s.pending; p != nil && p != b && !slices.Contains(b.parents, p) {
		b.parents = append(b.parents, p)
	}
}

// waitParents waits for the commits of the handed-off batches b read
// from and returns ErrParentFailed if any of them was not committed.
func (b *Batch) waitParents() error {
	for _, p := range b.parents {
		<-p.committed
		if p.commitErr != nil {
			return fmt.Errorf("%w: %w", ErrParentFailed, p.commitErr)
		}
	}
	b.parents = nil // committed: nothing to keep them for (a chain of batches would)
	return nil
}

// Proposal implements State.
func (b *Batch) Proposal(space, id string) (*Proposal, error) {
	k := spaceID{space, id}
	if sl, ok := b.props[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pp *Proposal
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.props[k]
		if ok && sl.dirty {
			pp = sl.cur
		}
		return ok && sl.dirty
	}) {
		// pp is the pending batch's, never modified again: it is orig
		// (what Pebble holds once that batch commits), the caller gets a
		// copy.
		c := pp.Clone()
		b.props[k] = &propSlot{origKnown: true, orig: pp, cur: c}
		return c, nil
	}
	if p := b.s.recentProposal(k); p != nil {
		if b.ended() {
			return nil, ErrBatchDone
		}
		// p is the committed value, never modified: it is orig, and the
		// caller gets a copy (as from Pebble, a value of its own).
		c := p.Clone()
		b.props[k] = &propSlot{origKnown: true, orig: p, cur: c}
		return c, nil
	}
	if b.neverWritten(preProposal, space, id) {
		if err := b.check(); err != nil {
			return nil, err
		}
		b.props[k] = &propSlot{origKnown: true}
		return nil, nil
	}
	var p *Proposal
	err := b.read(func(r pebble.Reader) error {
		var v Proposal
		found, err := getJSON(r, proposalKey(space, id), &v)
		if found && err == nil {
			p = &v
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read proposal %q in space %q: %w", id, space, err)
	}
	// orig is a private copy: the index diff of Commit must not depend on
	// a caller that modifies what it got in place.
	sl := &propSlot{origKnown: true, cur: p}
	if p != nil {
		sl.orig = p.Clone()
	}
	b.props[k] = sl
	return p, nil
}

// PutProposal implements State. The proposal's Space and ID are its key.
func (b *Batch) PutProposal(p *Proposal) error {
	if err := b.check(); err != nil {
		return err
	}
	if p == nil {
		return errors.New("projections: batch: put nil proposal")
	}
	k := spaceID{p.Space, p.ID}
	if _, ok := b.props[k]; !ok {
		// The version it replaces, for the change index.
		if _, err := b.Proposal(p.Space, p.ID); err != nil {
			return err
		}
	}
	b.noteWrite(preProposal, p.Space, p.ID)
	sl, ok := b.props[k]
	if !ok {
		sl = &propSlot{}
		b.props[k] = sl
	}
	b.noteChange(sl.cur, p)
	if !sl.dirty {
		sl.dirty = true
		b.dirty++
	}
	sl.cur = p
	b.spaces[p.Space] = struct{}{}
	return nil
}

// EventRef implements State.
func (b *Batch) EventRef(space, id string) (*EventRef, error) {
	k := spaceID{space, id}
	if sl, ok := b.refs[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pref *EventRef
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.refs[k]
		if ok && sl.dirty {
			r := *sl.cur
			r.Proposals = slices.Clone(r.Proposals)
			pref = &r
		}
		return ok && sl.dirty
	}) {
		b.refs[k] = &refSlot{cur: pref}
		return pref, nil
	}
	if b.neverWritten(preRef, space, id) {
		if err := b.check(); err != nil {
			return nil, err
		}
		b.refs[k] = &refSlot{}
		return nil, nil
	}
	var ref *EventRef
	err := b.read(func(r pebble.Reader) error {
		var v EventRef
		found, err := getJSON(r, eventRefKey(space, id), &v)
		if found && err == nil {
			ref = &v
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read event ref %q in space %q: %w", id, space, err)
	}
	b.refs[k] = &refSlot{cur: ref}
	return ref, nil
}

// PutEventRef implements State.
func (b *Batch) PutEventRef(space, id string, r *EventRef) error {
	if err := b.check(); err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("projections: batch: put nil event ref %q in space %q", id, space)
	}
	k := spaceID{space, id}
	b.noteWrite(preRef, space, id)
	sl, ok := b.refs[k]
	if !ok {
		sl = &refSlot{}
		b.refs[k] = sl
	}
	if !sl.dirty {
		sl.dirty = true
		b.dirty++
	}
	sl.cur = r
	b.spaces[space] = struct{}{}
	return nil
}

// Orphans implements State.
func (b *Batch) Orphans(space, target string) ([]Orphan, error) {
	k := spaceID{space, target}
	if sl, ok := b.orphans[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var plist []Orphan
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.orphans[k]
		if ok && sl.dirty {
			plist = slices.Clone(sl.cur)
		}
		return ok && sl.dirty
	}) {
		b.orphans[k] = &orphanSlot{cur: plist}
		return plist, nil
	}
	var list []Orphan
	err := b.read(func(r pebble.Reader) error {
		_, err := getJSON(r, orphansKey(space, target), &list)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read orphans of %q in space %q: %w", target, space, err)
	}
	if len(list) == 0 {
		list = nil
	}
	b.orphans[k] = &orphanSlot{cur: list}
	return list, nil
}

// PutOrphans implements State: an empty list deletes the waiting list.
func (b *Batch) PutOrphans(space, target string, o []Orphan) error {
	if err := b.check(); err != nil {
		return err
	}
	if len(o) == 0 {
		o = nil
	}
	k := spaceID{space, target}
	sl, ok := b.orphans[k]
	if !ok {
		sl = &orphanSlot{}
		b.orphans[k] = sl
	}
	if !sl.dirty {
		sl.dirty = true
		b.dirty++
	}
	sl.cur = o
	if o != nil {
		b.spaces[space] = struct{}{}
	}
	return nil
}

// PutHistory implements State.
func (b *Batch) PutHistory(space, key string, h *HistoryEntry) error {
	if err := b.check(); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("projections: batch: put nil history entry under %q in space %q", key, space)
	}
	k := historyID{space, key, h.Seq}
	if _, ok := b.history[k]; !ok {
		b.dirty++
	}
	b.history[k] = h
	b.spaces[space] = struct{}{}
	return nil
}

// DeleteHistory implements State.
func (b *Batch) DeleteHistory(space, key string, seq uint64) error {
	if err := b.check(); err != nil {
		return err
	}
	k := historyID{space, key, seq}
	if _, ok := b.history[k]; !ok {
		b.dirty++
	}
	b.history[k] = nil
	return nil
}

// Stats implements State: nil when the space has none.
func (b *Batch) Stats(space string) (*Stats, error) {
	if sl, ok := b.stats[space]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pst *Stats
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.stats[space]
		if ok && sl.dirty {
			pst = sl.cur // not owned: MutableStats clones it
		}
		return ok && sl.dirty
	}) {
		b.stats[space] = &statsSlot{cur: pst}
		return pst, nil
	}
	var st *Stats
	err := b.read(func(r pebble.Reader) error {
		v := NewStats()
		found, err := getJSON(r, statsKey(space), v)
		if found && err == nil {
			st = v
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read stats of space %q: %w", space, err)
	}
	b.stats[space] = &statsSlot{cur: st}
	return st, nil
}

// MutableStats returns the stats of space (NewStats() when it has none) as
// a private copy of the batch that the caller may change in place until the
// batch ends; PutStats of it records the change. The fold uses it instead of
// cloning the stats for every event (Stats.Clone copies six maps: it was 6%
// of the fold's CPU, and more in garbage).
func (b *Batch) MutableStats(space string) (*Stats, error) {
	if sl, ok := b.stats[space]; ok && sl.owned {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	st, err := b.Stats(space)
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = NewStats()
	} else {
		st = st.Clone()
	}
	sl := b.stats[space] // made by Stats
	sl.cur, sl.owned = st, true
	return st, nil
}

// PutStats implements State.
func (b *Batch) PutStats(space string, st *Stats) error {
	if err := b.check(); err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("projections: batch: put nil stats in space %q", space)
	}
	sl, ok := b.stats[space]
	if !ok {
		sl = &statsSlot{}
		b.stats[space] = sl
	}
	if !sl.dirty {
		sl.dirty = true
		b.dirty++
	}
	if sl.cur != st {
		sl.cur, sl.owned = st, false
	}
	b.spaces[space] = struct{}{}
	return nil
}

// Discard is Close, for deferred calls.
func (b *Batch) Discard() { _ = b.Close() }

// Close ends the batch without writing anything: its overlay is dropped,
// and a handed-off batch closed instead of committed fails, with
// ErrParentFailed, the commits of the batches that read from it. It always
// returns nil, and is safe to call more than once and after Commit.
func (b *Batch) Close() error {
	b.endPending(ErrBatchDone) // handed off and closed without a commit
	b.finish()
	return nil
}

func (b *Batch) finish() {
	b.done = true
	b.props, b.refs, b.orphans, b.stats, b.history, b.spaces = nil, nil, nil, nil, nil, nil
	b.aux, b.parents = nil, nil
	b.changes = nil
	b.dirty = 0
}

// kv is one write of a commit; a nil val with del set is a deletion.
type kv struct {
	key, val []byte
	del      bool
}

// Commit writes the overlay and the checkpoint seq in one Pebble batch with
// pebble.Sync: the dirty records, the index entries that changed (the old
// version's that are gone deleted, the new version's written), space
// markers, and the checkpoint. Keys are written in sorted order, so the
// result does not depend on the order of the overlay's writes. Then
// AppliedSeq() is seq and waiters are woken. The batch is ended whatever
// the outcome.
//
// seq must be greater than AppliedSeq() (ErrStaleCommit otherwise), except
// that an empty batch at seq == AppliedSeq() is a no-op.
func (b *Batch) Commit(seq uint64) (err error) {
	if b.done {
		return ErrBatchDone
	}
	defer b.finish()
	defer func() { b.endPending(err) }() // before finish: readers leave first
	b.tieToPending()                     // one pending now, made after b: b follows it
	if err := b.waitParents(); err != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, err)
	}
	s := b.s
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()

	if s.failed != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, s.failed)
	}
	applied := s.applied.Load()
	if seq <= applied {
		if seq == applied && b.dirty == 0 {
			return nil
		}
		return fmt.Errorf("%w: commit seq %d, applied %d", ErrStaleCommit, seq, applied)
	}
	defer s.cbuf.release()
	ops, err := b.collect(&s.cbuf)
	if err != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, err)
	}
	ops = append(ops, kv{key: checkpointKey, val: appendU64(nil, seq)})
	// Sorted, the writes go into the memtable in order (its inserts reuse
	// the previous position), and a key written twice shows up.
	// An index is sorted, not the writes: swapping 4-byte ints is cheaper
	// than swapping kv structs (and their pointers' write barriers).
	order := s.cbuf.order[:0]
	for i := range ops {
		order = append(order, int32(i))
	}
	s.cbuf.order = order
	slices.SortFunc(order, func(x, y int32) int { return bytes.Compare(ops[x].key, ops[y].key) })

	pb := s.cbuf.batch(s.db)
	for i, oi := range order {
		o := ops[oi]
		if i > 0 && bytes.Equal(ops[order[i-1]].key, o.key) {
			return fmt.Errorf("projections: commit seq %d: key %q written twice", seq, o.key)
		}
		if o.del {
			err = pb.Delete(o.key, nil)
		} else {
			err = pb.Set(o.key, o.val, nil)
		}
		if err != nil {
			return fmt.Errorf("projections: commit seq %d: %w", seq, err)
		}
	}
	if err := s.commitPebble(pb); err != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, err)
	}
	s.remember(b)
	for sp := range b.spaces {
		s.spaces[sp] = struct{}{}
	}
	s.published(seq)
	return nil
}

// recentCap bounds Store.recent (about 1.5 KiB a proposal).
const recentCap = 4096

type recentProposal struct {
	p   *Proposal
	gen uint64 // recentGen of the write
}

type recentKey struct {
	k   spaceID
	gen uint64
}

// remember adds the proposals b wrote to Store.recent. The caller holds
// writeMu, after a successful commit.
func (s *Store) remember(b *Batch) {
	if s.recentCap <= 0 {
		return
	}
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	if s.recent == nil {
		s.recent = make(map[spaceID]recentProposal, s.recentCap)
	}
	for k, sl := range b.props {
		if !sl.dirty {
			continue
		}
		if sl.cur.Kernel != nil {
			delete(s.recent, k) // not kept; an older version must not be read
			continue
		}
		s.recentGen++
		s.recent[k] = recentProposal{p: sl.cur, gen: s.recentGen}
		s.recentOrder = append(s.recentOrder, recentKey{k, s.recentGen})
	}
	// Forget the oldest writes; a key written again since stays.
	drop := 0
	for len(s.recentOrder)-drop > s.recentCap {
		o := s.recentOrder[drop]
		if r, ok := s.recent[o.k]; ok && r.gen == o.gen {
			delete(s.recent, o.k)
		}
		drop++
	}
	if drop > 0 {
		s.recentOrder = append(s.recentOrder[:0], s.recentOrder[drop:]...)
	}
}

// recentProposal returns the proposal k as the last commits left it, or
// nil when it is not in Store.recent.
func (s *Store) recentProposal(k spaceID) *Proposal {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	return s.recent[k].p
}

// commitPebble commits pb with pebble.Sync. Pebble reports a WAL write or
// sync error of a commit through Logger.Fatalf, which pebbleLogger turns
// into a pebbleFatal panic: that one is recovered here and becomes
// ErrStoreFailed (sticky), so that a full disk stops the projector with an
// error instead of killing the process. The caller holds writeMu.
func (s *Store) commitPebble(pb *pebble.Batch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(pebbleFatal)
			if !ok {
				panic(v)
			}
			s.failed = fmt.Errorf("%w: %s", ErrStoreFailed, f.msg)
			s.log.Error().Str("component", "pebble").Msg(f.msg)
			err = s.failed
		}
	}()
	return pb.Commit(pebble.Sync)
}

// commitBuf is the scratch memory of Commit, reused from commit to commit
// (a rebuild commits hundreds of batches of thousands of writes): the
// writes, their keys and values, and the Pebble batch. It belongs to the
// store and is used under writeMu.
type commitBuf struct {
	a        arena
	ops      []kv
	old, cur []kv // one proposal's index entries
	order    []int32
	pb       *pebble.Batch
}

// batch returns the reusable Pebble batch, empty.
func (c *commitBuf) batch(db *pebble.DB) *pebble.Batch {
	if c.pb == nil {
		c.pb = db.NewBatch(pebble.WithMaxRetainedSizeBytes(maxRetainedBatch))
	} else {
		c.pb.Reset()
	}
	return c.pb
}

// release ends a commit's use of c: what it handed out is no longer
// referenced, and an unusually large buffer is let go.
func (c *commitBuf) release() {
	clear(c.ops) // no pointers into old arenas kept alive
	c.ops = c.ops[:0]
	if cap(c.a.b) > maxRetainedBatch {
		c.a.b = nil
	}
	if cap(c.ops) > maxRetainedBatch/64 {
		c.ops = nil
	}
	if c.pb != nil {
		c.pb.Reset() // drops its buffer when above maxRetainedBatch
	}
}

// close releases the Pebble batch; the caller holds the store exclusively.
func (c *commitBuf) close() {
	if c.pb != nil {
		_ = c.pb.Close()
		c.pb = nil
	}
}

// maxRetainedBatch bounds the Pebble batch buffer a store keeps between
// commits (a batch of 1000 bench events is about 1.3 MiB).
const maxRetainedBatch = 8 << 20

// collect turns the overlay into writes, encoded into c (valid until its
// next use). It reads from Pebble the original version of proposals that
// were written without being read first.
func (b *Batch) collect(c *commitBuf) ([]kv, error) {
	c.a.reset()
	ops := c.ops[:0]
	put := func(start int, del bool) { // the key is c.a.b[start:], or key then value
		ops = append(ops, kv{key: c.a.take(start), del: del})
	}
	putKV := func(keyStart, valStart int) {
		ops = append(ops, kv{key: c.a.b[keyStart:valStart:valStart], val: c.a.take(valStart)})
	}
	var err error
	for k, sl := range b.props {
		if !sl.dirty {
			continue
		}
		orig := sl.orig
		if !sl.origKnown {
			// Read here, not kept in the slot: a later batch may be
			// reading this (handed-off) batch's slots.
			var v Proposal
			found, err := getJSON(b.s.db, proposalKey(k.space, k.id), &v)
			if err != nil {
				return nil, fmt.Errorf("read proposal %q in space %q: %w", k.id, k.space, err)
			}
			if found {
				orig = &v
			}
		}
		if sl.cur.Space != k.space || sl.cur.ID != k.id {
			return nil, fmt.Errorf("proposal %q in space %q was put as %q in %q", k.id, k.space, sl.cur.ID, sl.cur.Space)
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, tagProposal, k.space, k.id)
		vs := len(c.a.b)
		// json.Marshal's bytes, faster (encode.go)
		if c.a.b, err = appendMarshalProposal(c.a.b, sl.cur); err != nil {
			return nil, fmt.Errorf("encode proposal %q in space %q: %w", k.id, k.space, err)
		}
		putKV(ks, vs)
		// Both lists are in key order: one merge finds the entries the
		// new version drops and those it adds or changes.
		c.old = c.a.indexEntries(c.old[:0], orig)
		c.cur = c.a.indexEntries(c.cur[:0], sl.cur)
		i, j := 0, 0
		for i < len(c.old) || j < len(c.cur) {
			switch {
			case j == len(c.cur) || (i < len(c.old) && bytes.Compare(c.old[i].key, c.cur[j].key) < 0):
				ops = append(ops, kv{key: c.old[i].key, del: true})
				i++
			case i == len(c.old) || bytes.Compare(c.old[i].key, c.cur[j].key) > 0:
				ops = append(ops, c.cur[j])
				j++
			default:
				if !bytes.Equal(c.old[i].val, c.cur[j].val) {
					ops = append(ops, c.cur[j])
				}
				i++
				j++
			}
		}
	}
	for k, sl := range b.refs {
		if !sl.dirty {
			continue
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, tagEventRef, k.space, k.id)
		vs := len(c.a.b)
		c.a.b = appendEventRef(c.a.b, sl.cur)
		putKV(ks, vs)
	}
	for k, sl := range b.orphans {
		if !sl.dirty {
			continue
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, tagOrphans, k.space, k.id)
		if sl.cur == nil {
			put(ks, true)
			continue
		}
		val, err := json.Marshal(sl.cur)
		if err != nil {
			return nil, fmt.Errorf("encode orphans of %q in space %q: %w", k.id, k.space, err)
		}
		vs := len(c.a.b)
		c.a.b = append(c.a.b, val...)
		putKV(ks, vs)
	}
	for k, sl := range b.aux {
		if !sl.dirty {
			continue
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, k.tag, k.space, k.id)
		if sl.cur == nil {
			put(ks, true)
			continue
		}
		val, err := sl.value()
		if err != nil {
			return nil, fmt.Errorf("encode %c record in space %q: %w", k.tag, k.space, err)
		}
		vs := len(c.a.b)
		c.a.b = append(c.a.b, val...)
		putKV(ks, vs)
	}
	for sp, sl := range b.stats {
		if !sl.dirty {
			continue
		}
		val, err := json.Marshal(sl.cur)
		if err != nil {
			return nil, fmt.Errorf("encode stats of space %q: %w", sp, err)
		}
		ops = append(ops, kv{key: statsKey(sp), val: val})
	}
	for k, h := range b.history {
		ks := len(c.a.b)
		c.a.b = appendU64(appendSpaceID(c.a.b, tagHistory, k.space, k.key), k.seq)
		if h == nil {
			put(ks, true)
			continue
		}
		vs := len(c.a.b)
		if c.a.b, err = appendMarshalHistory(c.a.b, h); err != nil {
			return nil, fmt.Errorf("encode history seq %d under %q in space %q: %w", k.seq, k.key, k.space, err)
		}
		putKV(ks, vs)
	}
	for sp := range b.spaces {
		if _, ok := b.s.spaces[sp]; ok {
			continue
		}
		ops = append(ops, kv{key: spaceKey(sp), val: []byte{}})
	}
	if ops, err = b.collectChanges(c, ops); err != nil {
		return nil, err
	}
	c.ops = ops
	return ops, nil
}
