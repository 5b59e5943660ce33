package projections

import (
	"hash/maphash"
	"sync/atomic"
)

// writtenFilter is a Bloom filter of the records that batches of a store
// opened empty have written (proposals, event refs, filed counts): a key it
// has never seen is in no batch and not in Pebble, so prefetch gives it an
// absent slot without a read. Most of what a fold looks up does not exist
// (the event ref of each new event id, the record and filed count of each
// new proposal): on a rebuild from sequence 1 these reads were most of
// prefetch's Pebble work.
//
// A false positive costs the read it would have cost anyway; there are no
// false negatives, because every write of the store goes through a batch's
// Put methods, which add the key before Commit can write it. It is safe for
// concurrent use (atomics), and a filter that has taken in more writes
// than it can tell keys apart for is dropped (Store.written becomes nil)
// rather than kept answering "maybe".
type writtenFilter struct {
	bits  []atomic.Uint64
	mask  uint64 // number of bits - 1 (a power of two)
	seed  maphash.Seed
	added atomic.Uint64
	max   uint64 // keys after which the filter stops being worth asking
}

// writtenFilterBits is the filter's size: 2^26 bits, 8 MiB, about 4 bits
// per key (a false positive rate of 16% with 4 probes) at 16M keys, some 7M
// events of the bench's mix; after 32M writes (a key written again counts
// again) it is dropped.
const writtenFilterBits = 1 << 26

// writtenKey names a record the filter tracks.
type writtenKey struct {
	kind      int // preProposal, preRef or preFiled
	space, id string
}

func newWrittenFilter(bits uint64) *writtenFilter {
	return &writtenFilter{
		bits: make([]atomic.Uint64, bits/64),
		mask: bits - 1,
		seed: maphash.MakeSeed(),
		max:  bits / 2,
	}
}

// probes returns the filter's four bit positions for k (double hashing).
func (f *writtenFilter) probes(k writtenKey) [4]uint64 {
	h := maphash.Comparable(f.seed, k)
	h1, h2 := h, (h>>32|h<<32)|1
	return [4]uint64{h1 & f.mask, (h1 + h2) & f.mask, (h1 + 2*h2) & f.mask, (h1 + 3*h2) & f.mask}
}

// add records that k may exist; it reports false once the filter has
// taken max writes.
func (f *writtenFilter) add(k writtenKey) bool {
	for _, p := range f.probes(k) {
		f.bits[p/64].Or(1 << (p % 64))
	}
	return f.added.Add(1) <= f.max
}

// mayExist reports whether k may have been written; false means it never was.
func (f *writtenFilter) mayExist(k writtenKey) bool {
	for _, p := range f.probes(k) {
		if f.bits[p/64].Load()&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// noteWrite adds k to the store's filter, if it has one, before b writes
// it; a full filter is dropped.
func (b *Batch) noteWrite(kind int, space, id string) {
	if f := b.s.written.Load(); f != nil && !f.add(writtenKey{kind, space, id}) {
		b.s.written.CompareAndSwap(f, nil)
	}
}

// neverWritten reports whether the store's filter rules out that the
// record (kind, space, id) was ever written.
func (b *Batch) neverWritten(kind int, space, id string) bool {
	f := b.s.written.Load()
	return f != nil && !f.mayExist(writtenKey{kind, space, id})
}
