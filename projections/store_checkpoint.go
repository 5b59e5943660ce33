package projections

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// checkpoint is the store's applied sequence (what Commit last wrote with
// its batch) and the waiters for it to move. seq is read without a lock;
// mu guards notify, the channel closed and replaced at every publish, so
// that a waiter takes it, checks seq, then waits on it without missing a
// commit. done is closed once, by close (Store.Close).
type checkpoint struct {
	seq    atomic.Uint64
	mu     sync.Mutex // guards notify
	notify chan struct{}
	done   chan struct{}
}

func newCheckpoint() checkpoint {
	return checkpoint{notify: make(chan struct{}), done: make(chan struct{})}
}

// publish sets the applied sequence and wakes every waiter. Commit calls
// it, under the commit lock, once the batch is in Pebble.
func (c *checkpoint) publish(seq uint64) {
	c.seq.Store(seq)
	c.mu.Lock()
	close(c.notify)
	c.notify = make(chan struct{})
	c.mu.Unlock()
}

// close wakes every waiter for good (they return ErrClosed). Called once.
func (c *checkpoint) close() { close(c.done) }

// wait blocks until the applied sequence is at least seq, ctx is done
// (its error, wrapped) or close is called (ErrClosed).
func (c *checkpoint) wait(ctx context.Context, seq uint64) error {
	for {
		c.mu.Lock()
		ch := c.notify
		c.mu.Unlock()
		// Checked after taking ch: a commit that lands in between closes ch.
		if c.seq.Load() >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-c.done:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("projections: wait for seq %d (applied %d): %w", seq, c.seq.Load(), ctx.Err())
		}
	}
}

// AppliedSeq returns the checkpoint: the last stream sequence whose effects
// are committed.
func (s *Store) AppliedSeq() uint64 { return s.cp.seq.Load() }

// WaitApplied blocks until AppliedSeq() >= seq. It returns ctx's error
// (wrapped) when ctx is done first, and ErrClosed when the store closes.
func (s *Store) WaitApplied(ctx context.Context, seq uint64) error {
	return s.cp.wait(ctx, seq)
}
