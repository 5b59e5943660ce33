package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// asOfIdle is how long a cached as-of projection is kept after its last
// read.
const asOfIdle = time.Minute

// asOfCache answers the API's as-of reads (api.AsOfFunc): it folds the log
// up to the point asked for into a temporary projection under <data>/tmp
// (repair.At), one fold at a time, and keeps the asOfKeep most recently
// used ones, so that the reads of one audit (get, history, list pages,
// stats at one point) fold once and callers asking for the same point
// share one fold (those waiting for it are answered from it). A cached
// projection is reused for a sequence query when it was folded to
// exactly that sequence, and for a time query when it was made for that
// same time and its fold stopped before the end of the log (the first
// event after the time was already stored, so later appends cannot change
// the answer). It is removed when evicted (and no read uses it any more),
// after asOfIdle without reads, and at shutdown.
//
// A fold for a point B does not start from a cached fold at A < B: the
// cached store is read by others, and continuing it would need a copy of
// it (as much disk as the fold it saves) or a fold that stays open for
// writes while readers use it.
//
// Bounds (issue 36 item 2): one fold runs at a time; at most asOfKeep + 1
// temporary stores are open at once (reserveStore: the fold's, the kept
// ones, and kept ones evicted while a read still uses them); each uses
// asOfMemTable and asOfCacheSize (about asOfCacheSize + 2 × asOfMemTable
// of memory each, plus the 8 MiB filter of written keys of a store
// opened empty: 24 MiB, so at most (asOfKeep + 1) × that); on disk
// each takes about the live projection's size. Before folding, the cache
// evicts kept folds until the temporary directory's volume keeps room
// for one more (the live projection's size) plus what the ledger needs
// to write (room): past that, the read is refused 503 as_of_busy.
type asOfCache struct {
	js     jetstream.JetStream
	tmp    string
	folder *fold.Folder // the live fold's (its mark keys)
	log    zerolog.Logger
	sem    chan struct{} // one fold at a time

	// Set after newAsOfCache (nil: unchecked, uncounted).
	metrics *metrics.Metrics
	room    func() (free, need uint64, err error) // the temporary volume's free bytes, and what a fold needs there

	mu      sync.Mutex
	entries []*asOfEntry // least recently used first
	closed  bool
	// Folds asked for and not yet done (waiting or folding), per caller
	// and in total: a caller has at most asOfPerCaller, the server
	// asOfQueue (issue 36 item 5).
	pending  map[string]int
	nPending int
	// Temporary stores open (folding, kept, or evicted and still read),
	// and the most open at once: at most asOfKeep + 1.
	open, peakOpen int
}

// The as-of fold shares: one fold in hand per caller (waiting for the
// fold slot or folding), asOfQueue in hand for the whole server. Past
// them a read that needs a new fold is answered at once 429 or 503
// as_of_busy instead of waiting behind the others; a read of a point
// already folded is never refused. asOfKeep folds are kept for reuse.
const (
	asOfPerCaller = 1
	asOfQueue     = 8
	asOfKeep      = 4
	// The Pebble memtable and block cache of a temporary projection.
	asOfMemTable  = 4 << 20
	asOfCacheSize = 8 << 20
)

type asOfEntry struct {
	view    *repair.View
	seq     uint64    // the last sequence folded
	at      time.Time // the time asked for, for a time query
	byTime  bool      // at is a valid key (the fold stopped before the end)
	refs    int       // reads using it, plus one while it is cached
	lastUse time.Time
	timer   *time.Timer
}

func newAsOfCache(js jetstream.JetStream, tmp string, folder *fold.Folder, log zerolog.Logger) *asOfCache {
	return &asOfCache{js: js, tmp: tmp, folder: folder, log: log, sem: make(chan struct{}, 1), pending: map[string]int{}}
}

func (e *asOfEntry) matches(p api.AsOfPoint) bool {
	return (p.Seq > 0 && e.seq == p.Seq) || (p.Seq == 0 && e.byTime && e.at.Equal(p.Time))
}

// hit returns the cached entry for p, referenced, or nil.
func (c *asOfCache) hit(p api.AsOfPoint) *asOfEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	for i, e := range c.entries {
		if e.matches(p) {
			e.refs++
			e.lastUse = time.Now()
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e) // most recent last
			c.metrics.AsOfReused()
			return e
		}
	}
	return nil
}

// release drops one reference; the last one closes the view.
func (c *asOfCache) release(e *asOfEntry) {
	c.mu.Lock()
	e.refs--
	last := e.refs == 0
	c.mu.Unlock()
	if last {
		if err := e.view.Close(); err != nil {
			c.log.Warn().Err(err).Msg("remove as-of projection")
		}
		c.mu.Lock()
		c.open--
		c.mu.Unlock()
	}
}

// Stores reports the temporary stores open now and the most open at once
// so far (never over asOfKeep + 1: the memory bound).
func (c *asOfCache) Stores() (open, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peakOpen
}

// reserveStore counts the store of a new fold, evicting kept folds while
// asOfKeep + 1 stores are open (a kept fold evicted while a read uses it
// stays open until the read ends); when only such stores remain, the fold
// is refused 503 as_of_busy. The returned func undoes the count when the
// fold fails.
func (c *asOfCache) reserveStore() (unreserve func(), err error) {
	for {
		c.mu.Lock()
		if c.open < asOfKeep+1 {
			c.open++
			c.peakOpen = max(c.peakOpen, c.open)
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				c.open--
				c.mu.Unlock()
			}, nil
		}
		c.mu.Unlock()
		if !c.evictOldest() {
			return nil, &api.AsOfBusyError{Status: http.StatusServiceUnavailable,
				Message: fmt.Sprintf("%d as-of projections are open and in use, the most at once; retry later", asOfKeep+1)}
		}
	}
}

// evictOldest drops the least recently used entry from the cache (its
// files go once its reads end); false when none is kept.
func (c *asOfCache) evictOldest() bool {
	c.mu.Lock()
	if len(c.entries) == 0 {
		c.mu.Unlock()
		return false
	}
	e := c.entries[0]
	c.entries = c.entries[1:]
	c.mu.Unlock()
	e.timer.Stop()
	c.release(e)
	return true
}

// Held reports the folds in hand and the folds kept.
func (c *asOfCache) Held() (inHand, kept int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nPending, len(c.entries)
}

// checkRoom evicts kept folds until the temporary volume has room for
// one more fold, or refuses it 503 as_of_busy.
func (c *asOfCache) checkRoom() error {
	if c.room == nil {
		return nil
	}
	for {
		free, need, err := c.room()
		if err != nil || free >= need {
			return nil
		}
		if !c.evictOldest() {
			return &api.AsOfBusyError{Status: http.StatusServiceUnavailable,
				Message: fmt.Sprintf("the temporary directory %s has %d bytes free, under the %d a fold needs (the projection's size and what the ledger keeps free); retry later", c.tmp, free, need)}
		}
	}
}

// get is the api.AsOfFunc.
func (c *asOfCache) get(ctx context.Context, p api.AsOfPoint) (api.Reader, func(), error) {
	if e := c.hit(p); e != nil {
		return e.view, c.releaseFunc(e), nil
	}
	caller, _ := connbudget.Caller(ctx)
	done, err := c.take(caller)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	if e := c.hit(p); e != nil { // folded by a request we waited for
		return e.view, c.releaseFunc(e), nil
	}
	last, err := c.lastSeq(ctx)
	if err != nil {
		return nil, nil, err
	}
	if p.Seq > last {
		return nil, nil, fmt.Errorf("%w: sequence %d (the log ends at %d)", api.ErrBeyondLog, p.Seq, last)
	}
	if err := c.checkRoom(); err != nil {
		return nil, nil, err
	}
	unreserve, err := c.reserveStore()
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	v, err := repair.At(ctx, c.js, repair.Point{Seq: p.Seq, Time: p.Time}, repair.Options{TempDir: c.tmp, Folder: c.folder,
		MemTableSize: asOfMemTable, CacheSize: asOfCacheSize})
	if err != nil {
		unreserve()
		return nil, nil, err
	}
	c.metrics.AsOfFolded()
	e := &asOfEntry{view: v, seq: v.AppliedSeq(), refs: 2, lastUse: time.Now()}
	if p.Seq == 0 {
		e.at, e.byTime = p.Time, e.seq < last
	}
	c.log.Debug().Str("point", v.Point.String()).Uint64(logging.KeySeq, e.seq).Dur(logging.KeyTook, time.Since(start)).Msg("as-of projection folded")
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = v.Close()
		unreserve()
		return nil, nil, fmt.Errorf("app: shutting down")
	}
	c.entries = append(c.entries, e)
	e.timer = time.AfterFunc(asOfIdle, func() { c.expire(e) })
	over := len(c.entries) > asOfKeep
	c.mu.Unlock()
	if over {
		c.evictOldest()
	}
	return v, c.releaseFunc(e), nil
}

// take counts a fold in hand for caller, or refuses it over a share.
func (c *asOfCache) take(caller string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.pending[caller] >= asOfPerCaller:
		return nil, &api.AsOfBusyError{Status: http.StatusTooManyRequests,
			Message: fmt.Sprintf("this caller has %d as-of fold in hand, the most one caller may; retry when it is answered", asOfPerCaller)}
	case c.nPending >= asOfQueue:
		return nil, &api.AsOfBusyError{Status: http.StatusServiceUnavailable,
			Message: fmt.Sprintf("the server has %d as-of folds in hand, its most; retry later", asOfQueue)}
	}
	c.pending[caller]++
	c.nPending++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.nPending--
			if c.pending[caller]--; c.pending[caller] <= 0 {
				delete(c.pending, caller)
			}
		})
	}, nil
}

func (c *asOfCache) releaseFunc(e *asOfEntry) func() {
	var once sync.Once
	return func() { once.Do(func() { c.release(e) }) }
}

// expire drops e from the cache when it has not been read for asOfIdle.
func (c *asOfCache) expire(e *asOfEntry) {
	c.mu.Lock()
	i := slices.Index(c.entries, e)
	if i < 0 {
		c.mu.Unlock()
		return
	}
	if idle := time.Since(e.lastUse); idle < asOfIdle {
		e.timer.Reset(asOfIdle - idle)
		c.mu.Unlock()
		return
	}
	c.entries = slices.Delete(c.entries, i, i+1)
	c.mu.Unlock()
	c.release(e)
}

// close drops the cached projections (removed once their reads finish)
// and refuses new folds.
func (c *asOfCache) close() {
	c.mu.Lock()
	c.closed = true
	es := c.entries
	c.entries = nil
	c.mu.Unlock()
	for _, e := range es {
		e.timer.Stop()
		c.release(e)
	}
}

func (c *asOfCache) lastSeq(ctx context.Context) (uint64, error) {
	st, err := c.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, fmt.Errorf("app: as-of: stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("app: as-of: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}
