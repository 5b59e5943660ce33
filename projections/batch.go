package projections

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/fold"
)

// The batch overlay.

type spaceID struct{ space, id string }

type historyID struct {
	space, key string
	seq        uint64
}

// slot is the overlay's entry for one record: its value as read (from
// Pebble, the pending batch or the recent cache) or as last put, the zero
// value meaning absent, and whether this batch put it (dirty: Commit
// writes it, or deletes it when absent). A slot exists once the record was
// looked at, so that each record is read at most once per batch and
// absence is remembered too.
type slot[T any] struct {
	cur   T
	dirty bool
}

// put makes v the record's value; the first put counts the record in the
// batch's Len.
func (sl *slot[T]) put(b *Batch, v T) {
	if !sl.dirty {
		sl.dirty = true
		b.dirty++
	}
	sl.cur = v
}

// slotOf returns m's slot for k, made clean and absent when there is none
// (a put of a record never read).
func slotOf[K comparable, S any](m map[K]*S, k K) *S {
	sl, ok := m[k]
	if !ok {
		sl = new(S)
		m[k] = sl
	}
	return sl
}

// The overlay's slots, by record kind.
type (
	refSlot    = slot[*fold.EventRef]
	orphanSlot = slot[[]fold.Orphan]
	// propSlot also keeps the version in Pebble, which Commit needs to
	// change the indexes.
	propSlot struct {
		slot[*api.Proposal]
		orig      *api.Proposal // the version in Pebble (nil: none), valid when origKnown
		origKnown bool
	}
	statsSlot struct {
		slot[*api.Stats]
		owned bool // cur is the batch's private copy (MutableStats)
	}
)

// knownProp returns the slot of a proposal whose version in Pebble is
// known to be orig, with cur as its value.
func knownProp(orig, cur *api.Proposal) *propSlot {
	sl := &propSlot{orig: orig, origKnown: true}
	sl.cur = cur
	return sl
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
	s    *Store
	done bool

	props   map[spaceID]*propSlot
	refs    map[spaceID]*refSlot
	orphans map[spaceID]*orphanSlot
	aux     map[auxID]*auxSlot
	stats   map[string]*statsSlot
	history map[historyID]*api.HistoryEntry // nil value: delete
	spaces  map[string]struct{}
	dirty   int

	// The change index (store_changes.go).
	changes map[changeID]*api.Change
	// The event index (store_events.go).
	events map[uint64]*evSlot

	// The hole watch (holes_watch.go): the MEW spaces the current
	// arrival (at coverSeq) touched, and the current runs last put.
	coverTouched map[mewKey]struct{}
	runMarks     map[auxID]runMark
	coverSeq     uint64
	// noHoles: the fold writing through this batch keeps no coverage
	// (fold.Folder.WithoutCoverage, a benchmark's baseline): no hole
	// change is worked out (SkipCoverage).
	noHoles bool

	// The Merkle tree's stored hashes of the batch's events, indexes
	// treeFrom on (tree.go).
	tree     []tlog.Hash
	treeFrom int64

	// Pipelined commits (Handoff). frozen: b was handed off; its owner
	// may no longer change it. committed is closed when its Commit (or
	// Close) ends, commitErr (set before) says how. parents are the
	// handed-off batches b read writes from.
	frozen    bool
	committed chan struct{}
	commitErr error
	parents   []*Batch
}

// newBatchSized returns an empty batch of s with room for the records of
// about events events (a rebuild's batches are large: growing the maps was
// measurable).
func newBatchSized(s *Store, events int) *Batch {
	return &Batch{
		s:       s,
		props:   make(map[spaceID]*propSlot, events),
		refs:    make(map[spaceID]*refSlot, events),
		orphans: map[spaceID]*orphanSlot{},
		aux:     make(map[auxID]*auxSlot, events),
		stats:   map[string]*statsSlot{},
		history: make(map[historyID]*api.HistoryEntry, events),
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

// Proposal implements State.
func (b *Batch) Proposal(space, id string) (*api.Proposal, error) {
	k := spaceID{space, id}
	if sl, ok := b.props[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pp *api.Proposal
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
		b.props[k] = knownProp(pp, c)
		return c, nil
	}
	if p := b.s.recent.get(k); p != nil {
		if b.ended() {
			return nil, ErrBatchDone
		}
		// p is the committed value, never modified: it is orig, and the
		// caller gets a copy (as from Pebble, a value of its own).
		c := p.Clone()
		b.props[k] = knownProp(p, c)
		return c, nil
	}
	if b.neverWritten(preProposal, space, id) {
		if err := b.check(); err != nil {
			return nil, err
		}
		b.props[k] = knownProp(nil, nil)
		return nil, nil
	}
	var p *api.Proposal
	err := b.read(func(r pebble.Reader) error {
		var v api.Proposal
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
	sl := knownProp(nil, p)
	if p != nil {
		sl.orig = p.Clone()
	}
	b.props[k] = sl
	return p, nil
}

// PutProposal implements State. The proposal's Space and ID are its key.
func (b *Batch) PutProposal(p *api.Proposal) error {
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
	sl := slotOf(b.props, k)
	b.noteChange(sl.cur, p)
	sl.put(b, p)
	b.spaces[p.Space] = struct{}{}
	return nil
}

// EventRef implements State.
func (b *Batch) EventRef(space, id string) (*fold.EventRef, error) {
	k := spaceID{space, id}
	if sl, ok := b.refs[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pref *fold.EventRef
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
	var ref *fold.EventRef
	err := b.read(func(r pebble.Reader) error {
		var v fold.EventRef
		found, err := getBin(r, eventRefKey(space, id), func(b []byte) error { return decodeEventRef(b, &v) })
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
func (b *Batch) PutEventRef(space, id string, r *fold.EventRef) error {
	if err := b.check(); err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("projections: batch: put nil event ref %q in space %q", id, space)
	}
	k := spaceID{space, id}
	b.noteWrite(preRef, space, id)
	slotOf(b.refs, k).put(b, r)
	b.spaces[space] = struct{}{}
	return nil
}

// Orphans implements State.
func (b *Batch) Orphans(space, target string) ([]fold.Orphan, error) {
	k := spaceID{space, target}
	if sl, ok := b.orphans[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var plist []fold.Orphan
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
	var list []fold.Orphan
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
func (b *Batch) PutOrphans(space, target string, o []fold.Orphan) error {
	if err := b.check(); err != nil {
		return err
	}
	if len(o) == 0 {
		o = nil
	}
	k := spaceID{space, target}
	slotOf(b.orphans, k).put(b, o)
	if o != nil {
		b.spaces[space] = struct{}{}
	}
	return nil
}

// PutHistory implements State.
func (b *Batch) PutHistory(space, key string, h *api.HistoryEntry) error {
	if err := b.check(); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("projections: batch: put nil history entry under %q in space %q", key, space)
	}
	if err := b.noteHistory(space, key, h); err != nil {
		return err
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
	if err := b.noteHistoryDelete(space, key, seq); err != nil {
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
func (b *Batch) Stats(space string) (*api.Stats, error) {
	if sl, ok := b.stats[space]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pst *api.Stats
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.stats[space]
		if ok && sl.dirty {
			pst = sl.cur // not owned: MutableStats clones it
		}
		return ok && sl.dirty
	}) {
		b.stats[space] = &statsSlot{slot: slot[*api.Stats]{cur: pst}}
		return pst, nil
	}
	var st *api.Stats
	err := b.read(func(r pebble.Reader) error {
		v := api.NewStats()
		found, err := getJSON(r, statsKey(space), v)
		if found && err == nil {
			st = v
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read stats of space %q: %w", space, err)
	}
	b.stats[space] = &statsSlot{slot: slot[*api.Stats]{cur: st}}
	return st, nil
}

// MutableStats returns the stats of space (NewStats() when it has none) as
// a private copy of the batch that the caller may change in place until the
// batch ends; PutStats of it records the change. The fold uses it instead of
// cloning the stats for every event (Stats.Clone copies six maps: it was 6%
// of the fold's CPU, and more in garbage).
func (b *Batch) MutableStats(space string) (*api.Stats, error) {
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
		st = api.NewStats()
	} else {
		st = st.Clone()
	}
	sl := b.stats[space] // made by Stats
	sl.cur, sl.owned = st, true
	return st, nil
}

// PutStats implements State.
func (b *Batch) PutStats(space string, st *api.Stats) error {
	if err := b.check(); err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("projections: batch: put nil stats in space %q", space)
	}
	sl := slotOf(b.stats, space)
	if sl.cur != st {
		sl.owned = false
	}
	sl.put(b, st)
	b.spaces[space] = struct{}{}
	return nil
}
