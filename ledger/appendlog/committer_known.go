package appendlog

import (
	"slices"
	"sync"

	"github.com/mewledger/ledger/ledger"
)

// The committer's side of a retry being a duplicate for ever (stored.go):
// one Index lookup per group, in gather, right before the group is
// published; the members the Index knows are not published, and are
// answered in their place in acceptance order once their stored copy is
// verified.

// confirmConcurrency bounds the verifications of one group's known
// members that run at once (each reads one stored message).
const confirmConcurrency = 16

// lookup asks the Index about b's members in one call (and the log, for
// those it cannot vouch for: stored.go) and takes those stored out of
// b.items. When the log cannot be read, b.lookupErr is set and nothing
// of b is published.
func (c *groupCommitter) lookup(b *batch) {
	n := len(b.items)
	clear(c.ids)
	c.ids = c.ids[:0]
	clear(c.ps)
	c.ps = c.ps[:0]
	for _, pd := range b.items {
		c.ids = append(c.ids, pd.p.Identity())
		c.ps = append(c.ps, pd.p)
	}
	c.seqs = slices.Grow(c.seqs[:0], n)[:n]
	if err := c.a.lookup(c.life, c.ps, c.ids, c.seqs); err != nil {
		b.lookupErr = err
		return
	}
	known := 0
	for i, seq := range c.seqs {
		if seq != 0 {
			b.items[i].known = seq
			known++
		}
	}
	if known == 0 {
		return
	}
	c.known.Add(int64(known))
	if b.all == nil { // else b.all holds the followers too (splitFollowers)
		b.all = b.items
	}
	b.known += known
	b.items = make([]*Pending, 0, n-known)
	for _, pd := range b.all {
		if !pd.isKnown() {
			b.items = append(b.items, pd)
		}
	}
}

// confirmKnown verifies each known member of b against its stored copy
// (concurrently) and sets its answer.
func (c *groupCommitter) confirmKnown(b *batch) {
	ctx, cancel := c.ctx()
	defer cancel()
	sem := make(chan struct{}, confirmConcurrency)
	var wg sync.WaitGroup
	for _, pd := range b.all {
		if !pd.isKnown() {
			continue
		}
		if pd.follows != nil && pd.follows.seq != 0 {
			pd.kres = c.followResult(ctx, pd) // no I/O
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if pd.follows != nil {
				pd.kres = c.followResult(ctx, pd)
				return
			}
			pd.kres = c.a.confirmKnown(ctx, pd.p, pd.known)
		}()
	}
	wg.Wait()
}

// resolveIn resolves pd, a published member of b, after the known members
// accepted before it.
func (c *groupCommitter) resolveIn(b *batch, pd *Pending, r ledger.Result) {
	c.flushKnown(b, pd)
	c.resolve(pd, r)
}

// flushKnown resolves, in order, b's known members accepted before pd
// (every one not yet resolved when pd is nil).
func (c *groupCommitter) flushKnown(b *batch, pd *Pending) {
	if b.known == 0 {
		return
	}
	for b.next < len(b.all) {
		x := b.all[b.next]
		b.next++
		if x == pd {
			return
		}
		if x.isKnown() {
			c.resolve(x, x.kres)
		}
	}
}
