package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/mewledger/ledger/ledger"
)

// item is one entry of the backlog: a lifecycle envelope to append, or a
// gap marker (gap set) that the writer records in its place in the
// order, once everything before it has been answered.
type item struct {
	n      uint64    // receive number (frames are numbered as received)
	raw    []byte    // the envelope
	sender string    // history mode: the real sender
	v      Verdict   // the filter's verdict
	at     time.Time // when the bridge received it
	gap    *ledger.Gap
}

func (it *item) size() int { return len(it.raw) + 64 }

// backlog is the bounded queue between the reader (the gateway
// connection, which must never wait for the ledger) and the writer (the
// one goroutine that appends, in receive order, in batches). Envelopes
// count against maxBytes; gap markers are small and always fit. It is
// safe for concurrent use.
type backlog struct {
	mu       sync.Mutex
	items    []item
	bytes    int
	maxBytes int
	closed   bool
	inflight int // envelopes taken and not yet answered
	// Drops: envelopes that did not fit since the last gap marker, and
	// when the first of them was received. The marker of the hole goes
	// before the next envelope that fits, or is handed to the writer as
	// soon as the backlog is empty (dropGap builds it).
	dropped  int
	dropFrom time.Time
	dropGap  func(dropped int, from, to time.Time) *ledger.Gap
	wake     chan struct{} // cap 1: something was pushed or it was closed
	room     chan struct{} // cap 1: something was taken
}

func newBacklog(maxBytes int, dropGap func(dropped int, from, to time.Time) *ledger.Gap) *backlog {
	return &backlog{maxBytes: maxBytes, dropGap: dropGap, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push appends it unless the backlog is closed or full (an envelope that
// does not fit); it reports whether it was taken. An envelope that does
// not fit is counted as dropped (first: it is the first of a hole); the
// first envelope that fits after drops gets the hole's gap marker before
// it.
func (q *backlog) push(it item) (taken, first bool) {
	return q.pushDrop(it, true)
}

func (q *backlog) pushDrop(it item, drop bool) (taken, first bool) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false, false
	}
	if it.gap == nil && q.bytes > 0 && q.bytes+it.size() > q.maxBytes {
		if drop {
			first = q.dropped == 0
			if first {
				q.dropFrom = it.at
			}
			q.dropped++
		}
		q.mu.Unlock()
		return false, first
	}
	if it.gap == nil && q.dropped > 0 {
		q.items = append(q.items, item{gap: q.dropGap(q.dropped, q.dropFrom, it.at)})
		q.dropped, q.dropFrom = 0, time.Time{}
	}
	q.items = append(q.items, it)
	if it.gap == nil {
		q.bytes += it.size()
	}
	q.mu.Unlock()
	signal(q.wake)
	return true, false
}

// takeDrops returns the drops not yet in a marker, and forgets them (the
// caller's gap covers them).
func (q *backlog) takeDrops() (int, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, from := q.dropped, q.dropFrom
	q.dropped, q.dropFrom = 0, time.Time{}
	return n, from
}

// pushWait is push, waiting for room (history mode: the file keeps what
// the bridge has not read, so nothing needs dropping). It reports false
// when ctx ended or the backlog is closed.
func (q *backlog) pushWait(ctx context.Context, it item) bool {
	for {
		if ok, _ := q.pushDrop(it, false); ok {
			return true
		}
		q.mu.Lock()
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return false
		}
		select {
		case <-q.room:
		case <-ctx.Done():
			return false
		}
	}
}

// close stops pushes; take returns what is left, then nothing.
func (q *backlog) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.wake)
}

// take waits for items and returns the next batch: up to max envelopes in
// order, or one gap marker. It returns nil when the backlog is closed and
// empty, or ctx ended.
func (q *backlog) take(ctx context.Context, max int) []item {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			n := 1
			if q.items[0].gap == nil {
				for n < len(q.items) && n < max && q.items[n].gap == nil {
					n++
				}
			}
			out := make([]item, n)
			copy(out, q.items[:n])
			clear(q.items[:n])
			q.items = q.items[n:]
			for _, it := range out {
				if it.gap == nil {
					q.bytes -= it.size()
					q.inflight++
				}
			}
			q.mu.Unlock()
			signal(q.room)
			return out
		}
		if q.dropped > 0 {
			// Drained after drops: the hole's marker now, not at the next
			// envelope (the space may stay quiet).
			g := q.dropGap(q.dropped, q.dropFrom, time.Now())
			q.dropped, q.dropFrom = 0, time.Time{}
			q.mu.Unlock()
			return []item{{gap: g}}
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil
		}
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil
		}
	}
}

// done marks n envelopes taken as answered.
func (q *backlog) done(n int) {
	q.mu.Lock()
	q.inflight -= n
	q.mu.Unlock()
}

// len returns the envelopes waiting or being appended (and gap markers
// waiting), and the bytes waiting.
func (q *backlog) len() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) + q.inflight, q.bytes
}
