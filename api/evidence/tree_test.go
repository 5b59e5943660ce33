package evidence_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
)

// mth is RFC 6962's Merkle Tree Hash by its definition, with
// transparency-dev's hasher: an independent root.
func mth(leaves [][]byte) []byte {
	h := rfc6962.DefaultHasher
	switch len(leaves) {
	case 0:
		return h.EmptyRoot()
	case 1:
		return h.HashLeaf(leaves[0])
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return h.HashChildren(mth(leaves[:k]), mth(leaves[k:]))
}

func hashSlices(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// TestProofsIndependent: roots, inclusion and consistency proofs made from
// the stored hashes verify with transparency-dev/merkle, and with this
// package, for every leaf and every pair of sizes of trees up to 70
// leaves, and a sample of a tree spanning several tiles.
func TestProofsIndependent(t *testing.T) {
	tr := buildTree(t, 600, "a")
	check := func(n int64) {
		root := tr.root(t, n)
		if ind := mth(tr.leaves[:n]); !bytes.Equal(ind, root[:]) {
			t.Fatalf("size %d: root %s, RFC 6962 by definition %x", n, root, ind)
		}
		cp := evidence.Checkpoint{Origin: "o", Size: n, Hash: root}
		for i := int64(0); i < n; i += max(1, n/23) {
			p, err := tlog.ProveRecord(n, i, tr)
			if err != nil {
				t.Fatal(err)
			}
			lh := evidence.LeafHash(tr.leaves[i])
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), uint64(n), lh[:], hashSlices(p), root[:]); err != nil {
				t.Fatalf("size %d leaf %d: transparency-dev: %v", n, i, err)
			}
			if err := evidence.VerifyInclusion(cp, i, lh, p); err != nil {
				t.Fatalf("size %d leaf %d: %v", n, i, err)
			}
		}
		for m := int64(1); m <= n; m += max(1, n/17) {
			p, err := tlog.ProveTree(n, m, tr)
			if err != nil {
				t.Fatal(err)
			}
			old := tr.root(t, m)
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(m), uint64(n), hashSlices(p), old[:], root[:]); err != nil {
				t.Fatalf("%d → %d: transparency-dev: %v", m, n, err)
			}
			if err := evidence.VerifyConsistency(evidence.Checkpoint{Origin: "o", Size: m, Hash: old}, cp, p); err != nil {
				t.Fatalf("%d → %d: %v", m, n, err)
			}
		}
	}
	for n := int64(1); n <= 70; n++ {
		check(n)
	}
	for _, n := range []int64{255, 256, 257, 511, 512, 600} {
		check(n)
	}
}

func TestVerifyInclusionFails(t *testing.T) {
	tr := buildTree(t, 20, "a")
	root := tr.root(t, 20)
	cp := evidence.Checkpoint{Origin: "o", Size: 20, Hash: root}
	p, err := tlog.ProveRecord(20, 5, tr)
	if err != nil {
		t.Fatal(err)
	}
	lh := evidence.LeafHash(tr.leaves[5])
	other := evidence.LeafHash(tr.leaves[6])
	bad := append(tlog.RecordProof(nil), p...)
	bad[1][0] ^= 1
	for name, f := range map[string]func() error{
		"other leaf":   func() error { return evidence.VerifyInclusion(cp, 5, other, p) },
		"other index":  func() error { return evidence.VerifyInclusion(cp, 4, lh, p) },
		"past the end": func() error { return evidence.VerifyInclusion(cp, 20, lh, p) },
		"bad proof":    func() error { return evidence.VerifyInclusion(cp, 5, lh, bad) },
		"short proof":  func() error { return evidence.VerifyInclusion(cp, 5, lh, p[:len(p)-1]) },
	} {
		if err := f(); !errors.Is(err, evidence.ErrInclusion) {
			t.Errorf("%s: err %v, want ErrInclusion", name, err)
		}
	}
}

// TestVerifyConsistencyFails: a fork (another history from leaf 31 on), a
// rewrite (same size, other root), a shrink, another origin.
func TestVerifyConsistencyFails(t *testing.T) {
	a := buildTree(t, 50, "a")
	// b shares a's first 30 leaves, then diverges.
	b := &memTree{}
	for i := 0; i < 50; i++ {
		leaf := a.leaves[i]
		if i >= 30 {
			leaf, _ = testLeaf(uint64(i+1), "b").MarshalBinary()
		}
		b.add(t, leaf)
	}
	cpA := func(n int64) evidence.Checkpoint {
		return evidence.Checkpoint{Origin: "o", Size: n, Hash: a.root(t, n)}
	}
	cpB := func(n int64) evidence.Checkpoint {
		return evidence.Checkpoint{Origin: "o", Size: n, Hash: b.root(t, n)}
	}
	// Shared prefix: consistent across the two logs.
	p, _ := tlog.ProveTree(45, 30, b)
	if err := evidence.VerifyConsistency(cpA(30), cpB(45), p); err != nil {
		t.Fatalf("shared prefix: %v", err)
	}
	// a@40 → b@45: b's proof cannot show b extends a.
	p, _ = tlog.ProveTree(45, 40, b)
	err := evidence.VerifyConsistency(cpA(40), cpB(45), p)
	if !errors.Is(err, evidence.ErrForked) || errors.Is(err, evidence.ErrRewritten) {
		t.Fatalf("fork: err %v", err)
	}
	ra, rb := cpA(40).Hash, cpB(45).Hash
	if ind := proof.VerifyConsistency(rfc6962.DefaultHasher, 40, 45, hashSlices(p), ra[:], rb[:]); ind == nil {
		t.Fatal("transparency-dev accepts the fork")
	}
	if err := evidence.VerifyConsistency(cpA(40), cpB(40), nil); !errors.Is(err, evidence.ErrRewritten) || !errors.Is(err, evidence.ErrForked) {
		t.Fatalf("rewrite: err %v", err)
	}
	if err := evidence.VerifyConsistency(cpA(40), cpA(39), nil); !errors.Is(err, evidence.ErrShrank) {
		t.Fatalf("shrink: err %v", err)
	}
	other := cpA(45)
	other.Origin = "p"
	if err := evidence.VerifyConsistency(cpA(40), other, nil); !errors.Is(err, evidence.ErrOrigin) {
		t.Fatalf("origin: err %v", err)
	}
	// The same checkpoint, and from the empty tree: consistent.
	if err := evidence.VerifyConsistency(cpA(40), cpA(40), nil); err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifyConsistency(cpA(0), cpA(40), nil); err != nil {
		t.Fatal(err)
	}
}

// TestFrontier: the streaming root equals the stored tree's at every size.
func TestFrontier(t *testing.T) {
	tr := buildTree(t, 300, "a")
	var f evidence.Frontier
	if f.Root() != tr.root(t, 0) {
		t.Fatal("empty root")
	}
	for i, leaf := range tr.leaves {
		f.Append(evidence.LeafHash(leaf))
		if f.Size() != int64(i+1) || f.Root() != tr.root(t, int64(i+1)) {
			t.Fatalf("size %d: root %s, tree %s", i+1, f.Root(), tr.root(t, int64(i+1)))
		}
	}
}
