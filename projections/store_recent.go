package projections

import (
	"sync"

	"github.com/mewledger/ledger/api"
)

// recentCap bounds the recent cache (about 1.5 KiB a proposal).
const recentCap = 4096

// recentCache holds the proposals written by the last commits, as
// committed, up to cap of them (the oldest writes go first): the writer's
// next batches read them from here instead of Pebble. Follow-up events
// mostly name recent proposals, and the projector's batches are small when
// it keeps up (a batch is what arrived since the last one). Values are
// never modified (the fold puts modified copies). Kernel proposals are not
// kept. mu guards every field but cap, which is set once at open; a cap
// of 0 or less keeps nothing.
type recentCache struct {
	mu    sync.Mutex // guards m, order and gen
	m     map[spaceID]recentProposal
	order []recentKey // writes, oldest first
	gen   uint64
	cap   int
}

type recentProposal struct {
	p   *api.Proposal
	gen uint64 // gen of the write
}

type recentKey struct {
	k   spaceID
	gen uint64
}

// remember adds the proposals b wrote. Commit calls it after a successful
// commit, under the commit lock (so writes are remembered in commit
// order).
func (r *recentCache) remember(b *Batch) {
	if r.cap <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[spaceID]recentProposal, r.cap)
	}
	for k, sl := range b.props {
		if !sl.dirty {
			continue
		}
		if sl.cur.Kernel != nil {
			delete(r.m, k) // not kept; an older version must not be read
			continue
		}
		r.gen++
		r.m[k] = recentProposal{p: sl.cur, gen: r.gen}
		r.order = append(r.order, recentKey{k, r.gen})
	}
	// Forget the oldest writes; a key written again since stays.
	drop := 0
	for len(r.order)-drop > r.cap {
		o := r.order[drop]
		if e, ok := r.m[o.k]; ok && e.gen == o.gen {
			delete(r.m, o.k)
		}
		drop++
	}
	if drop > 0 {
		r.order = append(r.order[:0], r.order[drop:]...)
	}
}

// get returns the proposal k as the last commits left it, or nil when it
// is not kept.
func (r *recentCache) get(k spaceID) *api.Proposal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[k].p
}

// reset forgets everything (Store.Close).
func (r *recentCache) reset() {
	r.mu.Lock()
	r.m, r.order = nil, nil
	r.mu.Unlock()
}
