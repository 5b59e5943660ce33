package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/model"
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
	p    *model.Proposal
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
	keys, a := buf.keys, &buf.a
	var pending *Batch // the handed-off batch, read under the handoff lock
	add := func(kind int, space, id string) {
		k := spaceID{space, id}
		switch kind {
		case preProposal:
			if _, ok := b.props[k]; ok {
				return
			}
			if b.s.recent.get(k) != nil {
				return // Proposal takes it from there
			}
		case preRef:
			if _, ok := b.refs[k]; ok {
				return
			}
		case preFiled:
			if _, ok := b.aux[auxID{tagFiled, space, id}]; ok {
				return
			}
		}
		if b.neverWritten(kind, space, id) {
			// Absent, without a read (most keys: new ids).
			switch kind {
			case preProposal:
				b.props[k] = knownProp(nil, nil)
			case preRef:
				b.refs[k] = &refSlot{}
			case preFiled:
				b.aux[auxID{tagFiled, space, id}] = &auxSlot{}
			}
			return
		}
		if pending != nil && pending.wrote(kind, k) {
			return // the read methods take it from the pending batch
		}
		st := len(a.b)
		a.b = appendSpaceID(a.b, preTags[kind], space, id)
		keys = append(keys, preKey{kind: kind, k: k, key: a.take(st)})
	}
	b.s.handoff.mu.RLock()
	if p := b.s.handoff.pending; p != b {
		pending = p
	}
	for i := range evs {
		space, d, ok := evs[i].Decoded()
		if !ok {
			continue // rare paths read what they need themselves
		}
		if pass == 2 {
			if d.Type != ledger.TypeResponse {
				continue
			}
			for _, t := range d.Targets {
				// Only a ref this batch read (the first pass) is
				// looked at: one the fold will write is not known yet.
				if sl, ok := b.refs[spaceID{space, t}]; ok && sl.cur != nil && !sl.dirty && len(sl.cur.Proposals) > 0 {
					add(preProposal, space, sl.cur.Proposals[0])
				}
			}
			continue
		}
		add(preRef, space, d.Env.ID)
		switch d.Type {
		case ledger.TypeProposal:
			add(preProposal, space, d.Env.ID)
			add(preFiled, space, d.Env.ID)
		case ledger.TypeIgnored:
		case ledger.TypeResponse:
			for _, t := range d.Targets {
				add(preRef, space, t)
			}
		default:
			for _, t := range d.Targets {
				add(preProposal, space, t)
			}
		}
	}
	b.s.handoff.mu.RUnlock()
	buf.keys = keys
	if len(keys) == 0 {
		return nil
	}
	// In key order, and each key once (the tags tell the kinds apart).
	slices.SortFunc(keys, func(x, y preKey) int { return bytes.Compare(x.key, y.key) })
	keys = slices.CompactFunc(keys, func(x, y preKey) bool { return bytes.Equal(x.key, y.key) })
	buf.keys = keys
	err := b.read(func(r pebble.Reader) error {
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
				// Decoded here: v is valid until the iterator moves.
				switch pk.kind {
				case preProposal:
					pk.p = new(model.Proposal)
					if err = json.Unmarshal(v, pk.p); err != nil {
						err = fmt.Errorf("read proposal %q in space %q: decode %q: %w", pk.k.id, pk.k.space, pk.key, err)
					}
				case preRef:
					pk.r = new(fold.EventRef)
					if err = json.Unmarshal(v, pk.r); err != nil {
						err = fmt.Errorf("read event ref %q in space %q: decode %q: %w", pk.k.id, pk.k.space, pk.key, err)
					}
				default:
					pk.val = bytes.Clone(v)
				}
			}
			if err != nil {
				_ = it.Close()
				return err
			}
		}
		return it.Close()
	})
	if err != nil {
		return fmt.Errorf("projections: batch: prefetch %d records: %w", len(keys), err)
	}
	// Absent unless found: every key asked for gets a slot.
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
	return nil
}
