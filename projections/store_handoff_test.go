package projections

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// A handed-off batch's writes are visible to the next writable batch
// before its commit lands, as copies; the store's own reads
// see only committed state; the next batch commits after it, on top of it.
func TestStoreHandoffReadsThroughPendingBatch(t *testing.T) {
	s := openMemStore(t)
	putAll(t, s, 1, mkProp("sp", "old", 1, api.StatePending, "alice"))

	parent := s.NewBatch()
	p, err := parent.Proposal("sp", "old")
	must(t, err)
	p = p.Clone()
	p.State, p.UpdatedSeq = api.StateFulfilled, 2
	must(t, parent.PutProposal(p))
	must(t, parent.PutProposal(mkProp("sp", "new", 3, api.StatePending, "bob")))
	must(t, parent.PutEventRef("sp", "e3", &fold.EventRef{Seq: 3, Type: ledger.TypeProposal, Status: fold.EventApplied, Proposals: []string{"new"}}))
	must(t, parent.PutOrphans("sp", "later", []fold.Orphan{{Seq: 3, Target: "later"}}))
	must(t, parent.PutFiled("sp", "later", 2))
	st, err := parent.MutableStats("sp")
	must(t, err)
	st.Events = 3
	must(t, parent.PutStats("sp", st))

	must(t, parent.Handoff())
	if err := parent.PutProposal(mkProp("sp", "x", 4, api.StatePending, "eve")); !errors.Is(err, ErrBatchDone) {
		t.Fatalf("PutProposal after Handoff: %v, want ErrBatchDone", err)
	}
	if err := s.NewBatch().Handoff(); !errors.Is(err, ErrPending) {
		t.Fatalf("second Handoff: %v, want ErrPending", err)
	}

	child := s.NewBatch()
	got, err := child.Proposal("sp", "old")
	must(t, err)
	if got == nil || got.State != api.StateFulfilled {
		t.Fatalf("child reads old as %+v, want the pending batch's fulfilled version", got)
	}
	got.Proposer = "mutated" // the child's own copy
	if p.Proposer != "alice" {
		t.Fatal("the child's copy aliases the pending batch's proposal")
	}
	if n, err := child.Proposal("sp", "new"); err != nil || n == nil {
		t.Fatalf("child reads new: %v, %v", n, err)
	}
	if r, err := child.EventRef("sp", "e3"); err != nil || r == nil || r.Seq != 3 {
		t.Fatalf("child reads e3: %+v, %v", r, err)
	}
	if o, err := child.Orphans("sp", "later"); err != nil || len(o) != 1 {
		t.Fatalf("child reads orphans: %v, %v", o, err)
	}
	if n, err := child.Filed("sp", "later"); err != nil || n != 2 {
		t.Fatalf("child reads filed: %d, %v", n, err)
	}
	if cs, err := child.Stats("sp"); err != nil || cs == nil || cs.Events != 3 {
		t.Fatalf("child reads stats: %+v, %v", cs, err)
	}
	// Committed readers see none of it yet.
	if sp, err := s.Get("sp", "old"); err != nil || sp.State != api.StatePending {
		t.Fatalf("store Get of old as %+v, %v: want the committed pending version", sp, err)
	}
	if _, err := s.Get("sp", "new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("store Get of new before the commit: %v, want ErrNotFound", err)
	}

	got.State, got.UpdatedSeq, got.Proposer = api.StateRejected, 5, "alice"
	must(t, child.PutProposal(got))
	done := make(chan error, 1)
	go func() { done <- child.Commit(5) }() // waits for the parent's commit
	must(t, parent.Commit(3))
	must(t, <-done)

	if g, err := s.Get("sp", "old"); err != nil || g.State != api.StateRejected {
		t.Fatalf("after both commits old is %+v, %v", g, err)
	}
	if s.AppliedSeq() != 5 {
		t.Fatalf("checkpoint %d, want 5", s.AppliedSeq())
	}
	// The index follows the last version only: old is listed as rejected,
	// no longer as fulfilled or pending.
	for state, want := range map[api.ProposalState]int{api.StatePending: 1, api.StateFulfilled: 0, api.StateRejected: 1} {
		if n := len(listAll(t, s, ListQuery{Space: "sp", State: state})); n != want {
			t.Errorf("%d proposals listed as %s, want %d", n, state, want)
		}
	}
}

// A batch that read from a handed-off batch that was closed without a
// commit, or whose commit failed, refuses to commit.
func TestStoreHandoffParentNotCommitted(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(parent *Batch) error
	}{
		{"closed", func(parent *Batch) error { return parent.Close() }},
		{"stale", func(parent *Batch) error { return parent.Commit(1) }}, // at the checkpoint: ErrStaleCommit
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openMemStore(t)
			putAll(t, s, 1, mkProp("sp", "a", 1, api.StatePending, "alice"))
			parent := s.NewBatch()
			must(t, parent.PutProposal(mkProp("sp", "b", 2, api.StatePending, "bob")))
			must(t, parent.Handoff())
			child := s.NewBatch()
			if p, err := child.Proposal("sp", "b"); err != nil || p == nil {
				t.Fatalf("child reads b: %v, %v", p, err)
			}
			_ = tc.end(parent)
			if err := child.Commit(3); !errors.Is(err, ErrParentFailed) {
				t.Fatalf("child commit: %v, want ErrParentFailed", err)
			}
			if _, err := s.Get("sp", "b"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("b is in the store: %v", err)
			}
			// The store takes new batches again.
			b := s.NewBatch()
			must(t, b.PutProposal(mkProp("sp", "c", 4, api.StatePending, "carol")))
			must(t, b.Handoff())
			must(t, b.Commit(4))
		})
	}
}

// A handed-off batch refuses every use by its owner, reads included: a
// read that missed would change the overlay later batches are reading.
func TestStoreHandoffFrozenBatchRefusesReads(t *testing.T) {
	s := openMemStore(t)
	b := s.NewBatch()
	must(t, b.PutProposal(mkProp("sp", "a", 1, api.StatePending, "alice")))
	must(t, b.Handoff())
	defer func() { must(t, b.Commit(1)) }()
	uses := map[string]error{}
	_, uses["Proposal (written)"] = b.Proposal("sp", "a")
	_, uses["Proposal (missing)"] = b.Proposal("sp", "zz")
	_, uses["EventRef"] = b.EventRef("sp", "e")
	_, uses["Orphans"] = b.Orphans("sp", "t")
	_, uses["Stats"] = b.Stats("sp")
	_, uses["MutableStats"] = b.MutableStats("sp")
	_, uses["Filed"] = b.Filed("sp", "k")
	_, uses["Parked"] = b.Parked("sp", 9)
	uses["PutFiled"] = b.PutFiled("sp", "k", 1)
	uses["Handoff"] = b.Handoff()
	for name, err := range uses {
		if !errors.Is(err, ErrBatchDone) {
			t.Errorf("%s after Handoff: %v, want ErrBatchDone", name, err)
		}
	}
	if n := len(b.props); n != 1 {
		t.Errorf("the frozen overlay holds %d proposals, want the 1 written", n)
	}
}

// pendingAndBlindChild returns a store with a handed-off batch p (proposal
// a, seq 2) and a batch c made after it that wrote proposal b (seq 3)
// without reading anything.
func pendingAndBlindChild(t *testing.T) (*Store, *Batch, *Batch) {
	t.Helper()
	s := openMemStore(t)
	p := s.NewBatch()
	must(t, p.PutProposal(mkProp("sp", "a", 2, api.StatePending, "alice")))
	must(t, p.Handoff())
	c := s.NewBatch()
	must(t, c.PutProposal(mkProp("sp", "b", 3, api.StatePending, "bob")))
	return s, p, c
}

// A batch made while another is pending is tied to it even when it reads
// nothing it wrote: it commits after it, and not at all if it failed.
func TestStoreHandoffTiesLaterBatches(t *testing.T) {
	t.Run("failed parent", func(t *testing.T) {
		s, p, c := pendingAndBlindChild(t)
		must(t, p.Close())
		if err := c.Commit(3); !errors.Is(err, ErrParentFailed) {
			t.Fatalf("commit after the pending batch was closed: %v, want ErrParentFailed", err)
		}
		if s.AppliedSeq() != 0 {
			t.Fatalf("checkpoint moved to %d over a batch that never landed", s.AppliedSeq())
		}
	})
	t.Run("order", func(t *testing.T) {
		// In a synctest bubble (the store's goroutines too): once every
		// goroutine is blocked, c's Commit must be waiting for p's, not
		// done.
		synctest.Test(t, func(t *testing.T) {
			s, p, c := pendingAndBlindChild(t)
			done := make(chan error, 1)
			go func() { done <- c.Commit(3) }()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("a batch made while another was pending committed first (%v)", err)
			default:
			}
			must(t, p.Commit(2)) // ErrStaleCommit had c landed first
			must(t, <-done)
			if s.AppliedSeq() != 3 {
				t.Fatalf("checkpoint %d, want 3", s.AppliedSeq())
			}
		})
	})
}

// A parked event read through the pending batch is the reader's own copy.
func TestStoreHandoffParkedCopy(t *testing.T) {
	s := openMemStore(t)
	p := s.NewBatch()
	pk := &fold.ParkedEvent{Refs: 2}
	must(t, p.PutParked("sp", 7, pk))
	must(t, p.Handoff())
	c := s.NewBatch()
	got, err := c.Parked("sp", 7)
	must(t, err)
	if got == nil || got.Refs != 2 {
		t.Fatalf("child reads parked seq 7 as %+v", got)
	}
	got.Refs = 1
	if pk.Refs != 2 {
		t.Fatal("the child's parked event aliases the pending batch's")
	}
	must(t, p.Commit(7))
	must(t, c.PutParked("sp", 7, got))
	must(t, c.Commit(8))
	n := s.NewBatch()
	if again, err := n.Parked("sp", 7); err != nil || again == nil || again.Refs != 1 {
		t.Fatalf("after both commits parked seq 7 is %+v, %v; want Refs 1", again, err)
	}
	n.Discard()
}
