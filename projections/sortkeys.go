package projections

import (
	"bytes"
	"slices"
)

// sortKey is one write of a commit in the sort of its keys: an
// abbreviation of the key and the write's index.
type sortKey struct {
	abbr uint64
	idx  int32
}

// sortWrites returns the indexes of ops in key order (bytes.Compare),
// appended to order[:0]. Most keys of a table share a long prefix (the
// tag, the space), so comparing keys byte by byte from the start spent
// most of the commit's sort (a third of it in bytes.Compare, the rest in
// fetching keys): each key is abbreviated to its tag and the 7 bytes that
// follow the prefix every key of its tag in the batch shares, and only
// keys whose abbreviations tie are compared whole. The order is
// bytes.Compare's: keys of one tag agree up to that prefix, so their
// first difference is in or after the abbreviated bytes (a key that ends
// there is padded with zeros, and a tie is settled by the whole keys).
func sortWrites(order []sortKey, ops []kv) []sortKey {
	var first [256]int32 // index+1 of the first key of each tag
	var lcp [256]int     // the prefix every key of the tag shares
	for i := range ops {
		k := ops[i].key
		if len(k) == 0 {
			continue
		}
		t := k[0]
		if first[t] == 0 {
			first[t] = int32(i) + 1
			lcp[t] = len(k)
			continue
		}
		f := ops[first[t]-1].key
		n := min(lcp[t], len(k))
		j := 1
		for j < n && f[j] == k[j] {
			j++
		}
		lcp[t] = j
	}
	order = order[:0]
	for i := range ops {
		k := ops[i].key
		var a uint64
		if len(k) > 0 {
			a = uint64(k[0]) << 56
			rest := k[lcp[k[0]]:]
			for j := 0; j < 7 && j < len(rest); j++ {
				a |= uint64(rest[j]) << (48 - 8*j)
			}
		}
		order = append(order, sortKey{abbr: a, idx: int32(i)})
	}
	slices.SortFunc(order, func(x, y sortKey) int {
		switch {
		case x.abbr < y.abbr:
			return -1
		case x.abbr > y.abbr:
			return 1
		}
		return bytes.Compare(ops[x.idx].key, ops[y.idx].key)
	})
	return order
}
