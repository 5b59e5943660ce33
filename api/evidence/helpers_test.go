package evidence_test

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
)

// memTree is a tree of leaves kept in memory: its stored hashes, as the
// ledger keeps them in Pebble.
type memTree struct {
	leaves [][]byte
	hashes []tlog.Hash
}

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x < 0 || x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("hash %d not stored (have %d)", x, len(m.hashes))
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) add(t testing.TB, leaf []byte) {
	t.Helper()
	hs, err := tlog.StoredHashes(int64(len(m.leaves)), leaf, m)
	if err != nil {
		t.Fatal(err)
	}
	m.leaves = append(m.leaves, leaf)
	m.hashes = append(m.hashes, hs...)
}

func (m *memTree) root(t testing.TB, n int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(n, m)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var t0 = time.Date(2026, 11, 25, 14, 0, 0, 123456789, time.UTC)

// testLeaf is the leaf of message seq of a made-up history; salt changes
// its bytes (another history).
func testLeaf(seq uint64, salt string) *evidence.Leaf {
	l := &evidence.Leaf{
		Seq:     seq,
		Time:    t0.Add(time.Duration(seq) * time.Millisecond),
		Subject: fmt.Sprintf("ledger.default.p%d.proposal.alice", seq%7),
		Headers: []evidence.Header{{Name: evidence.HeaderMsgID, Value: fmt.Sprintf("default/e%d/%s", seq, salt)}},
		Data:    fmt.Appendf(nil, `{"protocol":"mew/v0.4","id":"e%d","from":"alice","kind":"mcp/proposal","salt":%q}`, seq, salt),
	}
	if seq%10 == 3 {
		l.Data = append(l.Data, 0xff) // not UTF-8
	}
	return l
}

// buildTree returns a tree of n test leaves.
func buildTree(t testing.TB, n int, salt string) *memTree {
	t.Helper()
	m := &memTree{}
	for i := 1; i <= n; i++ {
		b, err := testLeaf(uint64(i), salt).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		m.add(t, b)
	}
	return m
}

// newKey returns a fresh signer and verifier (and the verifier key) for origin.
func newKey(t testing.TB, origin string) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := evidence.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := evidence.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := evidence.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, vkey
}
