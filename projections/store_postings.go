package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// Posting lists of the event index.
//
// The fields with few distinct values (space, effect, type, kind, form,
// anomaly, tool, reason, code) are not indexed by one key per event but by
// posting lists: one key per field value per block of 2^postingShift
// stream sequences, whose value is the sorted list of the block's
// sequences that have the value:
//
//	'Q' field(1 B) esc(value) block(8 B BE) → uvarint deltas: the block's sequences with field=value
//
// block is seq >> postingShift; the first delta is from the block's first
// sequence. A commit reads each block it changes (at most one Get per
// field value per block: earlier commits are in Pebble by then), merges
// its additions and removals and writes the block once; a block left
// empty is deleted. The value of a block depends only on the set of
// sequences in it, so a rebuild writes the same bytes as the live fold
// whatever its batches. The fields with many distinct values (from,
// proposal, id) keep one 'J' key per event, where a posting list would
// cost a read per event.
const postingShift = 10

// postingField reports whether field f of the event index is kept in
// posting lists ('Q') rather than per-event keys ('J').
func postingField(f byte) bool {
	switch f {
	case evFrom, evProposal, evID:
		return false
	}
	return true
}

// TableEventPosting is the posting lists' table in api.KeyInfo.
const TableEventPosting = "event_posting"

func eventPostingPrefix(f byte, v string) []byte {
	return appendEsc([]byte{tagEventPosting, f}, v)
}

// postingChange is one sequence added to or removed from the list of
// key (a 'Q' prefix without the block).
type postingChange struct {
	key []byte
	seq uint64
	add bool
}

// postingEntries appends to dst the 'Q' prefixes (without the block) of
// r's posting fields, sorted and distinct, their bytes in a.
func postingEntries(dst [][]byte, a *arena, r *EventRecord) [][]byte {
	if r == nil {
		return dst
	}
	first := len(dst)
	add := func(f byte, v string) {
		if v == "" {
			return
		}
		st := len(a.b)
		a.b = appendEsc(append(a.b, tagEventPosting, f), v)
		dst = append(dst, a.take(st))
	}
	add(evSpace, r.Space)
	for _, e := range r.Effects {
		add(evEffect, string(e))
	}
	add(evType, r.Type)
	add(evKind, r.Kind)
	add(evForm, r.Form)
	for _, an := range r.Anomalies {
		add(evAnomaly, an)
	}
	add(evTool, r.Tool)
	add(evReason, r.Reason)
	for _, e := range r.Entries {
		add(evCode, e.Code)
	}
	ks := dst[first:]
	slices.SortFunc(ks, bytes.Compare)
	ks = slices.CompactFunc(ks, bytes.Equal)
	return dst[:first+len(ks)]
}

// diffPostings appends to ch the changes from the entries old to cur of
// the record at seq (both sorted).
func diffPostings(ch []postingChange, seq uint64, old, cur [][]byte) []postingChange {
	i, j := 0, 0
	for i < len(old) || j < len(cur) {
		switch {
		case j == len(cur) || (i < len(old) && bytes.Compare(old[i], cur[j]) < 0):
			ch = append(ch, postingChange{key: old[i], seq: seq})
			i++
		case i == len(old) || bytes.Compare(old[i], cur[j]) > 0:
			ch = append(ch, postingChange{key: cur[j], seq: seq, add: true})
			j++
		default:
			i++
			j++
		}
	}
	return ch
}

// collectPostings appends the writes of the blocks that ch changes, read
// from r and encoded in c.
func collectPostings(r pebble.Reader, c *commitBuf, ch []postingChange, ops []kv) ([]kv, error) {
	slices.SortFunc(ch, func(x, y postingChange) int {
		if d := bytes.Compare(x.key, y.key); d != 0 {
			return d
		}
		switch {
		case x.seq < y.seq:
			return -1
		case x.seq > y.seq:
			return 1
		}
		return 0
	})
	var seqs []uint64
	for i := 0; i < len(ch); {
		blk := ch[i].seq >> postingShift
		j := i + 1
		for j < len(ch) && bytes.Equal(ch[j].key, ch[i].key) && ch[j].seq>>postingShift == blk {
			j++
		}
		ks := len(c.a.b)
		c.a.b = appendU64(append(c.a.b, ch[i].key...), blk)
		key := c.a.take(ks)
		val, closer, err := r.Get(key)
		switch {
		case err == nil:
			seqs, err = decodePosting(seqs[:0], blk, val)
			_ = closer.Close()
			if err != nil {
				return nil, fmt.Errorf("posting list %q: %w", key, err)
			}
		case errors.Is(err, pebble.ErrNotFound):
			seqs = seqs[:0]
		default:
			return nil, err
		}
		existed := len(seqs) > 0
		for _, x := range ch[i:j] {
			k, found := slices.BinarySearch(seqs, x.seq)
			switch {
			case x.add && !found:
				seqs = slices.Insert(seqs, k, x.seq)
			case !x.add && found:
				seqs = slices.Delete(seqs, k, k+1)
			}
		}
		switch {
		case len(seqs) > 0:
			vs := len(c.a.b)
			c.a.b = appendPosting(c.a.b, blk, seqs)
			ops = append(ops, kv{key: key, val: c.a.take(vs)})
		case existed:
			ops = append(ops, kv{key: key, del: true})
		}
		i = j
	}
	return ops, nil
}

// appendPosting appends the encoding of seqs (sorted, all in block blk).
func appendPosting(b []byte, blk uint64, seqs []uint64) []byte {
	prev := blk << postingShift
	for _, s := range seqs {
		b = binary.AppendUvarint(b, s-prev)
		prev = s
	}
	return b
}

var errBadPosting = errors.New("projections: malformed posting list")

// decodePosting appends the sequences of the block blk's value v to dst.
func decodePosting(dst []uint64, blk uint64, v []byte) ([]uint64, error) {
	prev := blk << postingShift
	end := prev + 1<<postingShift
	for first := true; len(v) > 0; first = false {
		d, n := binary.Uvarint(v)
		if n <= 0 || (!first && d == 0) {
			return dst, errBadPosting
		}
		prev += d
		if prev >= end {
			return dst, errBadPosting
		}
		dst = append(dst, prev)
		v = v[n:]
	}
	return dst, nil
}

// seekPosting positions the posting term f at the first sequence at or
// after cand (at or before, when desc) and returns it; ok false when there
// is none. The block in hand is kept decoded: a zigzag join seeks each
// term many times within one block.
func (f *filterTerm) seekPosting(cand uint64, desc bool) (seq uint64, ok bool, err error) {
	blk := cand >> postingShift
	if !f.have || f.blk != blk {
		var valid bool
		if desc {
			valid = f.it.SeekLT(appendU64(bytes.Clone(f.prefix), blk+1))
		} else {
			valid = f.it.SeekGE(appendU64(bytes.Clone(f.prefix), blk))
		}
		if !valid {
			f.have = false
			return 0, false, nil
		}
		if err := f.load(); err != nil {
			return 0, false, err
		}
	}
	for {
		if desc {
			if i := sort.Search(len(f.seqs), func(i int) bool { return f.seqs[i] > cand }); i > 0 {
				return f.seqs[i-1], true, nil
			}
		} else if i := sort.Search(len(f.seqs), func(i int) bool { return f.seqs[i] >= cand }); i < len(f.seqs) {
			return f.seqs[i], true, nil
		}
		if !step(f.it, desc) {
			f.have = false
			return 0, false, nil
		}
		if err := f.load(); err != nil {
			return 0, false, err
		}
	}
}

// load decodes the block the term's iterator is at.
func (f *filterTerm) load() error {
	k := f.it.Key()
	if len(k) != len(f.prefix)+8 {
		return fmt.Errorf("%w: key %q", errBadPosting, bytes.Clone(k))
	}
	f.blk = binary.BigEndian.Uint64(k[len(f.prefix):])
	v, err := f.it.ValueAndErr()
	if err != nil {
		return err
	}
	if f.seqs, err = decodePosting(f.seqs[:0], f.blk, v); err != nil {
		return fmt.Errorf("key %q: %w", bytes.Clone(k), err)
	}
	f.have = true
	return nil
}
