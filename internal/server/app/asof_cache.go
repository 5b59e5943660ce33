package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// asOfIdle is how long the cached as-of projection is kept after its last
// read.
const asOfIdle = time.Minute

// asOfCache answers the API's as-of reads (api.AsOfFunc): it folds the log
// up to the point asked for into a temporary projection under <data>/tmp
// (repair.At), one fold at a time, and keeps the most recent one, so that
// the reads of one audit (get, history, list pages, stats at one point)
// fold once. A cached projection is reused for a sequence query when it
// was folded to exactly that sequence, and for a time query when it was
// made for that same time and its fold stopped before the end of the log
// (the first event after the time was already stored, so later appends
// cannot change the answer). It is removed when another replaces it and
// no read uses it any more, after asOfIdle without reads, and at shutdown.
type asOfCache struct {
	js     jetstream.JetStream
	tmp    string
	folder *fold.Folder // the live fold's (its mark keys)
	log    zerolog.Logger
	sem    chan struct{} // one fold at a time

	mu     sync.Mutex
	cur    *asOfEntry
	closed bool
	// Folds asked for and not yet done (waiting or folding), per caller
	// and in total: a caller has at most asOfPerCaller, the server
	// asOfQueue (issue 36 item 5).
	pending  map[string]int
	nPending int
}

// The as-of fold shares: one fold in hand per caller (waiting for the
// fold slot or folding), asOfQueue in hand for the whole server. Past
// them a read that needs a new fold is answered at once 429 or 503
// as_of_busy instead of waiting behind the others; a read of the point
// already folded is never refused.
const (
	asOfPerCaller = 1
	asOfQueue     = 8
)

type asOfEntry struct {
	view    *repair.View
	seq     uint64    // the last sequence folded
	at      time.Time // the time asked for, for a time query
	byTime  bool      // at is a valid key (the fold stopped before the end)
	refs    int       // reads using it, plus one while it is cur
	lastUse time.Time
	timer   *time.Timer
}

func newAsOfCache(js jetstream.JetStream, tmp string, folder *fold.Folder, log zerolog.Logger) *asOfCache {
	return &asOfCache{js: js, tmp: tmp, folder: folder, log: log, sem: make(chan struct{}, 1), pending: map[string]int{}}
}

// hit returns the cached entry for p, referenced, or nil.
func (c *asOfCache) hit(p api.AsOfPoint) *asOfEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.cur
	if e == nil || c.closed {
		return nil
	}
	if (p.Seq > 0 && e.seq == p.Seq) || (p.Seq == 0 && e.byTime && e.at.Equal(p.Time)) {
		e.refs++
		e.lastUse = time.Now()
		return e
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
	if e := c.hit(p); e != nil { // folded by the request we waited for
		return e.view, c.releaseFunc(e), nil
	}
	last, err := c.lastSeq(ctx)
	if err != nil {
		return nil, nil, err
	}
	if p.Seq > last {
		return nil, nil, fmt.Errorf("%w: sequence %d (the log ends at %d)", api.ErrBeyondLog, p.Seq, last)
	}
	start := time.Now()
	v, err := repair.At(ctx, c.js, repair.Point{Seq: p.Seq, Time: p.Time}, repair.Options{TempDir: c.tmp, Folder: c.folder})
	if err != nil {
		return nil, nil, err
	}
	e := &asOfEntry{view: v, seq: v.AppliedSeq(), refs: 2, lastUse: time.Now()}
	if p.Seq == 0 {
		e.at, e.byTime = p.Time, e.seq < last
	}
	c.log.Debug().Str("point", v.Point.String()).Uint64(logging.KeySeq, e.seq).Dur(logging.KeyTook, time.Since(start)).Msg("as-of projection folded")
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = v.Close()
		return nil, nil, fmt.Errorf("app: shutting down")
	}
	old := c.cur
	c.cur = e
	e.timer = time.AfterFunc(asOfIdle, func() { c.expire(e) })
	c.mu.Unlock()
	if old != nil {
		old.timer.Stop()
		c.release(old)
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
	if c.cur != e {
		c.mu.Unlock()
		return
	}
	if idle := time.Since(e.lastUse); idle < asOfIdle {
		e.timer.Reset(asOfIdle - idle)
		c.mu.Unlock()
		return
	}
	c.cur = nil
	c.mu.Unlock()
	c.release(e)
}

// close drops the cached projection (removed once its reads finish) and
// refuses new folds.
func (c *asOfCache) close() {
	c.mu.Lock()
	c.closed = true
	e := c.cur
	c.cur = nil
	c.mu.Unlock()
	if e != nil {
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
