package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// Prefetched record kinds.
const (
	preProposal = iota
	preRef
	preFiled
)

// preTags is the key tag of each prefetched record kind.
var preTags = [...]byte{preProposal: tagProposal, preRef: tagEventRef, preFiled: tagFiled}

type preKey struct {
	key  []byte
	kind int
	k    spaceID
	val  []byte // the value read, when found (preFiled only)
	ok   bool   // found
	p    *api.Proposal
	r    *fold.EventRef
}

// prefetchBuf is prefetch's scratch, recycled (a rebuild prefetches every
// batch): its keys and their bytes.
type prefetchBuf struct {
	keys []preKey
	a    arena
}

var prefetchBufs = sync.Pool{New: func() any { return new(prefetchBuf) }}

// reset empties buf for a pass; the records of the last one are let go.
func (buf *prefetchBuf) reset() {
	clear(buf.keys)
	buf.keys = buf.keys[:0]
	buf.a.reset()
}

// put returns buf to the pool, holding no records, unless it grew unusually large.
func (buf *prefetchBuf) put() {
	buf.reset()
	if cap(buf.keys) > 1<<16 || cap(buf.a.b) > 4<<20 {
		return
	}
	prefetchBufs.Put(buf)
}

// Prefetch implements [fold.Prefetcher]: it loads into the overlay, in key
// order with one Pebble iterator, the records the fold of evs reads first:
// the event ref of each envelope id, the proposal (and filed count) each
// event is about, and in a second pass the proposals of the fulfilments that
// responses name, once the first has read their event refs. Only events
// already decoded ([fold.DecodeAll]) are looked at. Records that the store's
// written filter rules out are not read at all (see writtenFilter); records
// already in the overlay are left alone. It returns the batch's read errors
// (ErrBatchDone, ErrClosed, storage errors).
func (b *Batch) Prefetch(evs []fold.Event) error {
	if err := b.check(); err != nil {
		return err
	}
	buf := prefetchBufs.Get().(*prefetchBuf)
	defer buf.put()
	for pass := 1; pass <= 2; pass++ {
		if err := b.prefetchPass(buf, evs, pass); err != nil {
			return err
		}
	}
	return nil
}

// prefetchPass collects the keys of one pass of prefetch that the
// overlay does not hold yet and loads them.
func (b *Batch) prefetchPass(buf *prefetchBuf, evs []fold.Event, pass int) error {
	buf.reset()
	keys := b.collectKeys(buf, evs, pass)
	buf.keys = keys
	if len(keys) == 0 {
		return nil
	}
	// In key order, and each key once (the tags tell the kinds apart).
	slices.SortFunc(keys, func(x, y preKey) int { return bytes.Compare(x.key, y.key) })
	keys = slices.CompactFunc(keys, func(x, y preKey) bool { return bytes.Equal(x.key, y.key) })
	buf.keys = keys
	if err := b.readKeys(keys); err != nil {
		return fmt.Errorf("projections: batch: prefetch %d records: %w", len(keys), err)
	}
	b.fillSlots(keys)
	return nil
}

// prefetchCollector gathers the keys of one pass into keys, their bytes
// in a.
type prefetchCollector struct {
	b       *Batch
	keys    []preKey
	a       *arena
	pending *Batch // the handed-off batch, read under the handoff lock
}

// collectKeys returns the keys pass (1: the event refs, proposals and
// filed counts of evs; 2: the proposals of the fulfilments that responses
// name) needs read, under the handoff lock.
func (b *Batch) collectKeys(buf *prefetchBuf, evs []fold.Event, pass int) []preKey {
	c := prefetchCollector{b: b, keys: buf.keys, a: &buf.a}
	b.s.handoff.mu.RLock()
	defer b.s.handoff.mu.RUnlock()
	if p := b.s.handoff.pending; p != b {
		c.pending = p
	}
	for i := range evs {
		space, d, ok := evs[i].Decoded()
		if !ok {
			continue // rare paths read what they need themselves
		}
		if pass == 2 {
			c.addResponseProposals(space, d)
			continue
		}
		c.addFirstPass(space, d)
	}
	return c.keys
}

// addFirstPass adds what the fold of d reads first: its event ref, and the
// proposal (with its filed count) it creates, or the proposals it targets,
// or, for a response, the event refs of the fulfilments it names.
func (c *prefetchCollector) addFirstPass(space string, d *ledger.Decoded) {
	c.add(preRef, space, d.Env.ID)
	switch d.Type {
	case ledger.TypeProposal:
		c.add(preProposal, space, d.Env.ID)
		c.add(preFiled, space, d.Env.ID)
	case ledger.TypeIgnored:
	case ledger.TypeResponse:
		for _, t := range d.Targets {
			c.add(preRef, space, t)
		}
	default:
		for _, t := range d.Targets {
			c.add(preProposal, space, t)
		}
	}
}

// addResponseProposals adds, for a response, the proposals of the
// fulfilments it names. Only a ref this batch read (the first pass) is
// looked at: one the fold will write is not known yet.
func (c *prefetchCollector) addResponseProposals(space string, d *ledger.Decoded) {
	if d.Type != ledger.TypeResponse {
		return
	}
	for _, t := range d.Targets {
		if sl, ok := c.b.refs[spaceID{space, t}]; ok && sl.cur != nil && !sl.dirty && len(sl.cur.Proposals) > 0 {
			c.add(preProposal, space, sl.cur.Proposals[0])
		}
	}
}

// add adds the key of a record of kind, unless the overlay (or the recent
// cache, or the pending batch) holds it or the written filter rules it out
// (then the overlay gets an absent slot, without a read).
func (c *prefetchCollector) add(kind int, space, id string) {
	b := c.b
	k := spaceID{space, id}
	if b.holds(kind, k) {
		return
	}
	if b.neverWritten(kind, space, id) {
		// Absent, without a read (most keys: new ids).
		b.setAbsent(kind, k)
		return
	}
	if c.pending != nil && c.pending.wrote(kind, k) {
		return // the read methods take it from the pending batch
	}
	st := len(c.a.b)
	c.a.b = appendSpaceID(c.a.b, preTags[kind], space, id)
	c.keys = append(c.keys, preKey{kind: kind, k: k, key: c.a.take(st)})
}

// holds reports whether the overlay already answers for the record of
// kind at k (for a proposal, the recent cache too).
func (b *Batch) holds(kind int, k spaceID) bool {
	switch kind {
	case preProposal:
		if _, ok := b.props[k]; ok {
			return true
		}
		return b.s.recent.get(k) != nil // Proposal takes it from there
	case preRef:
		_, ok := b.refs[k]
		return ok
	case preFiled:
		_, ok := b.aux[auxID{tagFiled, k.space, k.id}]
		return ok
	}
	return false
}

// setAbsent gives the record of kind at k an absent slot.
func (b *Batch) setAbsent(kind int, k spaceID) {
	switch kind {
	case preProposal:
		b.props[k] = knownProp(nil, nil)
	case preRef:
		b.refs[k] = &refSlot{}
	case preFiled:
		b.aux[auxID{tagFiled, k.space, k.id}] = &auxSlot{}
	}
}

// readKeys reads keys (sorted, distinct) with one iterator and decodes
// what it finds into them.
func (b *Batch) readKeys(keys []preKey) error {
	return b.read(func(r pebble.Reader) error {
		it, err := r.NewIter(nil)
		if err != nil {
			return err
		}
		for i := range keys {
			pk := &keys[i]
			if !it.SeekPrefixGE(pk.key) || !bytes.Equal(it.Key(), pk.key) {
				continue
			}
			v, err := it.ValueAndErr()
			if err == nil {
				pk.ok = true
				err = pk.decode(v) // here: v is valid until the iterator moves
			}
			if err != nil {
				_ = it.Close()
				return err
			}
		}
		return it.Close()
	})
}

// decode keeps the value v read for pk: a proposal or event ref decoded,
// a filed count's bytes copied.
func (pk *preKey) decode(v []byte) error {
	switch pk.kind {
	case preProposal:
		pk.p = new(api.Proposal)
		if err := json.Unmarshal(v, pk.p); err != nil {
			return fmt.Errorf("read proposal %q in space %q: decode %q: %w", pk.k.id, pk.k.space, pk.key, err)
		}
	case preRef:
		pk.r = new(fold.EventRef)
		if err := decodeEventRef(v, pk.r); err != nil {
			return fmt.Errorf("read event ref %q in space %q: decode %q: %w", pk.k.id, pk.k.space, pk.key, err)
		}
	default:
		pk.val = bytes.Clone(v)
	}
	return nil
}

// fillSlots gives every key asked for a slot: absent unless found.
func (b *Batch) fillSlots(keys []preKey) {
	for i := range keys {
		pk := &keys[i]
		switch pk.kind {
		case preProposal:
			sl := knownProp(nil, nil)
			if pk.ok {
				sl.cur, sl.orig = pk.p, pk.p.Clone()
			}
			b.props[pk.k] = sl
		case preRef:
			b.refs[pk.k] = &refSlot{cur: pk.r}
		case preFiled:
			b.aux[auxID{tagFiled, pk.k.space, pk.k.id}] = &auxSlot{slot: slot[[]byte]{cur: pk.val}}
		}
	}
}
