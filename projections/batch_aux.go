package projections

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"

	"github.com/mewledger/ledger/projections/fold"
)

// Small per-key records of the fold that are neither proposals, history,
// event refs nor waiting lists: parked orphan events and filed-entry
// counts. They share one overlay (auxSlot) and are written at Commit like
// everything else, in sorted key order.
//
//	'X' space seq(8 B)  → JSON ParkedEvent (an orphan event's bytes, stored once)
//	'F' space key       → decimal count of history entries filed under key
//	                      while it named no proposal
//
// (tags in store_keys.go)

type auxID struct {
	tag       byte
	space, id string
}

// auxSlot is the overlay's slot of a small record (cur nil: absent).
type auxSlot struct {
	slot[[]byte]
	// parked is the decoded ParkedEvent of a 'X' slot: the fold changes
	// its Refs once per waiting id, so it is kept as an object and encoded
	// once, at Commit (encoding a 1 MiB message per id was O(ids × size)).
	parked *fold.ParkedEvent
	// bridge is the decoded record of a 'B' slot (gaps.go): every marked
	// envelope reads and writes its recorder's record, so it is kept as
	// an object, handed out as copies and encoded once, at Commit (or
	// when a later batch reads it from this one while pending).
	bridge *api.BridgeSession
}

// value returns what Commit writes for the slot.
func (sl *auxSlot) value() ([]byte, error) {
	if sl.parked != nil {
		return json.Marshal(sl.parked)
	}
	if sl.bridge != nil && sl.cur != nil {
		return json.Marshal(sl.bridge)
	}
	return sl.cur, nil
}

func auxKey(tag byte, space, id string) []byte {
	return appendSpaceID(make([]byte, 0, 1+len(space)+len(id)+4), tag, space, id)
}

func parkedID(seq uint64) string { return string(binary.BigEndian.AppendUint64(nil, seq)) }

// getAux reads a small record through the overlay.
func (b *Batch) getAux(tag byte, space, id string) ([]byte, error) {
	k := auxID{tag, space, id}
	if sl, ok := b.aux[k]; ok {
		if b.ended() {
			return nil, ErrBatchDone
		}
		return sl.cur, nil
	}
	var pval []byte
	var perr error
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.aux[k]
		if ok && sl.dirty {
			pval, perr = sl.value() // a parked event: encoded anew, this batch's own copy
			if sl.cur == nil {
				pval = nil // deleted
			}
		}
		return ok && sl.dirty
	}) {
		if perr != nil {
			return nil, fmt.Errorf("projections: batch: read %c record %q in space %q from the pending batch: %w", tag, id, space, perr)
		}
		b.aux[k] = &auxSlot{slot: slot[[]byte]{cur: pval}}
		return pval, nil
	}
	if tag == tagFiled && b.neverWritten(preFiled, space, id) {
		if err := b.check(); err != nil {
			return nil, err
		}
		b.aux[k] = &auxSlot{}
		return nil, nil
	}
	var val []byte
	err := b.read(func(r pebble.Reader) error {
		v, closer, err := r.Get(auxKey(tag, space, id))
		if err == pebble.ErrNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		val = append([]byte(nil), v...)
		return closer.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read %c record %q in space %q: %w", tag, id, space, err)
	}
	b.aux[k] = &auxSlot{slot: slot[[]byte]{cur: val}}
	return val, nil
}

// putAux writes (or, with nil, deletes) a small record in the overlay.
func (b *Batch) putAux(tag byte, space, id string, val []byte) error {
	if err := b.check(); err != nil {
		return err
	}
	k := auxID{tag, space, id}
	if tag == tagFiled {
		b.noteWrite(preFiled, space, id)
	}
	slotOf(b.aux, k).put(b, val)
	if val != nil {
		b.spaces[space] = struct{}{}
	}
	return nil
}

// Parked implements State. The result is the overlay's own copy: the
// caller may change it and must PutParked it.
func (b *Batch) Parked(space string, seq uint64) (*fold.ParkedEvent, error) {
	id := parkedID(seq)
	val, err := b.getAux(tagParked, space, id)
	if err != nil {
		return nil, err
	}
	sl := b.aux[auxID{tagParked, space, id}]
	if sl.parked != nil {
		return sl.parked, nil
	}
	if val == nil {
		return nil, nil
	}
	var p fold.ParkedEvent
	if err := json.Unmarshal(val, &p); err != nil {
		return nil, fmt.Errorf("projections: batch: decode parked event seq %d in space %q: %w", seq, space, err)
	}
	sl.parked = &p
	return &p, nil
}

// PutParked implements State; the event is encoded at Commit.
func (b *Batch) PutParked(space string, seq uint64, p *fold.ParkedEvent) error {
	id := parkedID(seq)
	var val []byte
	if p != nil {
		val = []byte{} // present; the bytes are encoded at Commit
	}
	if err := b.putAux(tagParked, space, id, val); err != nil {
		return err
	}
	b.aux[auxID{tagParked, space, id}].parked = p
	return nil
}

// Filed implements State.
func (b *Batch) Filed(space, key string) (int, error) {
	val, err := b.getAux(tagFiled, space, key)
	if err != nil || val == nil {
		return 0, err
	}
	var n int
	if err := json.Unmarshal(val, &n); err != nil {
		return 0, fmt.Errorf("projections: batch: decode filed count of %q in space %q: %w", key, space, err)
	}
	return n, nil
}

// PutFiled implements State.
func (b *Batch) PutFiled(space, key string, n int) error {
	if n <= 0 {
		return b.putAux(tagFiled, space, key, nil)
	}
	return b.putAux(tagFiled, space, key, []byte(fmt.Sprint(n)))
}
