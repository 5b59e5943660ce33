package evidence

import "golang.org/x/mod/sumdb/tlog"

// Frontier computes the RFC 6962 root of a tree one leaf at a time, in
// O(log n) memory (the roots of its complete subtrees, largest first): a
// verifier streaming a whole log (an export) gets the root a checkpoint
// signs without storing the tree. The zero value is the empty tree. Not
// safe for concurrent use.
type Frontier struct {
	n      int64
	hashes []tlog.Hash
}

// Append adds a leaf by its leaf hash (LeafHash of its bytes).
func (f *Frontier) Append(leafHash tlog.Hash) {
	f.hashes = append(f.hashes, leafHash)
	for k := f.n; k&1 == 1; k >>= 1 { // each trailing 1 bit completes a subtree
		l := len(f.hashes)
		f.hashes = append(f.hashes[:l-2], tlog.NodeHash(f.hashes[l-2], f.hashes[l-1]))
	}
	f.n++
}

// Size returns the number of leaves appended.
func (f *Frontier) Size() int64 { return f.n }

// Root returns the root hash of the leaves appended (tlog.TreeHash's; the
// empty tree's, SHA-256 of nothing, for none).
func (f *Frontier) Root() tlog.Hash {
	if len(f.hashes) == 0 {
		h, _ := tlog.TreeHash(0, nil)
		return h
	}
	h := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(f.hashes[i], h)
	}
	return h
}
