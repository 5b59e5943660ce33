package projections

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/api"
)

// TestWrittenFilter checks the filter's contract: no false negatives, few
// false positives while it is within its size, and add reporting full past
// its maximum.
func TestWrittenFilter(t *testing.T) {
	const bits = 1 << 16
	f := newWrittenFilter(bits)
	n := bits / 8 // 8 bits a key: about 2.4% false positives with 4 probes
	for i := range n {
		if !f.add(writtenKey{preRef, "sp", fmt.Sprint("e-", i)}) {
			t.Fatalf("full after %d keys", i+1)
		}
	}
	for i := range n {
		if !f.mayExist(writtenKey{preRef, "sp", fmt.Sprint("e-", i)}) {
			t.Fatalf("false negative for key %d", i)
		}
	}
	fp := 0
	for i := range n {
		// Same ids, other kinds and spaces: distinct keys.
		if f.mayExist(writtenKey{preProposal, "sp", fmt.Sprint("e-", i)}) {
			fp++
		}
		if f.mayExist(writtenKey{preRef, "sq", fmt.Sprint("e-", i)}) {
			fp++
		}
	}
	if rate := float64(fp) / float64(2*n); rate > 0.05 {
		t.Fatalf("false positive rate %.3f at 8 bits a key", rate)
	}
	full := false
	for i := n; i <= bits/2+1; i++ {
		if !f.add(writtenKey{preFiled, "sp", fmt.Sprint(i)}) {
			full = true
		}
	}
	if !full {
		t.Fatal("add never reported the filter full")
	}
}

// TestWrittenFilterOnlyForEmptyStores: a store opened empty rules out
// records no batch wrote, and a store
// reopened with data has no filter (it cannot know what is in Pebble).
func TestWrittenFilterOnlyForEmptyStores(t *testing.T) {
	fs := vfs.NewMem()
	s, err := OpenStore(StoreOptions{FS: fs, Dir: "st"})
	if err != nil {
		t.Fatal(err)
	}
	if s.written.Load() == nil {
		t.Fatal("empty store has no written filter")
	}
	b := s.NewBatch()
	if err := b.PutProposal(mkProp("sp", "p", 1, api.StatePending, "alice")); err != nil {
		t.Fatal(err)
	}
	if b.neverWritten(preProposal, "sp", "p") {
		t.Fatal("a batch's write is ruled out")
	}
	mustCommit(t, b, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(StoreOptions{FS: fs, Dir: "st"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.written.Load() != nil {
		t.Fatal("a store reopened with data has a written filter")
	}
	b = s.NewBatch()
	defer b.Discard()
	if p, err := b.Proposal("sp", "p"); err != nil || p == nil {
		t.Fatalf("Proposal after reopen = %v, %v", p, err)
	}
}
