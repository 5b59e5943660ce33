package projections

import (
	"fmt"
	"slices"
	"sync"
)

// handoff is the store's side of pipelined commits: the batch handed off
// for commit ([Batch.Handoff]) and not yet committed, which writable
// batches read before Pebble. Its overlay is not changed while it is
// pending (Handoff freezes it), and it stops being pending, under mu,
// before its Commit or Close releases it. mu guards pending: writers
// (Handoff, endPending) hold it exclusively, batches reading through the
// pending one hold it shared.
type handoff struct {
	mu      sync.RWMutex // guards pending
	pending *Batch
}

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
	if err := b.endArrival(b.coverSeq); err != nil {
		return err
	}
	s := b.s
	s.handoff.mu.Lock()
	defer s.handoff.mu.Unlock()
	if s.handoff.pending != nil {
		return ErrPending
	}
	b.frozen = true
	b.committed = make(chan struct{})
	s.handoff.pending = b
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
	s.handoff.mu.Lock()
	if s.handoff.pending == b {
		s.handoff.pending = nil
		b.commitErr = err
		close(b.committed)
	}
	s.handoff.mu.Unlock()
}

// fromPending runs f on the pending batch, if there is one that b may read
// through, under the shared side of the handoff lock; when f reports that it found
// the record there, the pending batch becomes one of b's parents.
func (b *Batch) fromPending(f func(p *Batch) bool) bool {
	if b.ended() {
		return false
	}
	s := b.s
	s.handoff.mu.RLock()
	defer s.handoff.mu.RUnlock()
	p := s.handoff.pending
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
// the handoff lock shared and p is the store's pending batch.
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
	s.handoff.mu.RLock()
	defer s.handoff.mu.RUnlock()
	if p := s.handoff.pending; p != nil && p != b && !slices.Contains(b.parents, p) {
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
