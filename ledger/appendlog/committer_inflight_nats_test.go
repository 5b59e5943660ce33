package appendlog_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// inflightCommit makes every group an atomic batch of at most 16, with 8
// batches in flight: many batches outstanding at once.
var inflightCommit = appendlog.CommitOptions{MaxBatch: 16, MinAtomic: 1, BatchesInFlight: 8}

// TestGroupCommitManyInFlightAcceptanceOrder: 16 goroutines submit 1,600
// envelopes with 8 batches in flight. Acceptance order is the order of
// the Submit calls (made under one lock here, so the test knows it). Each
// envelope is answered its own sequence, holding its bytes; the stream
// stores them in acceptance order; and callers are answered in acceptance
// order (the committer's answers, recorded as it gives them, are in the
// order of the Submit calls).
func TestGroupCommitManyInFlightAcceptanceOrder(t *testing.T) {
	const appenders, each = 16, 100
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{Commit: inflightCommit})
	var (
		resMu    sync.Mutex
		resolved []*appendlog.Pending // in the order the committer answers
	)
	appendlog.OnResolve(a, func(pd *appendlog.Pending) {
		resMu.Lock()
		resolved = append(resolved, pd)
		resMu.Unlock()
	})

	var (
		mu      sync.Mutex
		order   []*appendlog.Pending // in acceptance order
		raws    [][]byte             // the same order
		wg      sync.WaitGroup
		subErrs = make(chan error, appenders)
	)
	for g := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				raw := tProposal(fmt.Sprintf("f%d-%d", g, i), "alice").raw()
				p, err := a.Prepare("", raw)
				if err != nil {
					subErrs <- err
					return
				}
				mu.Lock()
				pd, err := a.Submit(ctx, p)
				if err == nil {
					order = append(order, pd)
					raws = append(raws, raw)
				}
				mu.Unlock()
				if err != nil {
					subErrs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(subErrs)
	for err := range subErrs {
		t.Fatalf("submit: %v", err)
	}
	for _, pd := range order {
		<-pd.Done()
	}
	resMu.Lock()
	defer resMu.Unlock()
	for k, pd := range order {
		if resolved[k] != pd {
			t.Fatalf("the %d-th envelope answered is not the %d-th accepted", k, k)
		}
	}

	var last uint64
	for k, pd := range order {
		r, err := pd.Result(ctx)
		if err != nil || r.Duplicate || r.Seq <= last {
			t.Fatalf("envelope %d (accepted %d-th): %+v after seq %d", k, k, r, last)
		}
		last = r.Seq
		m, err := st.GetMsg(ctx, r.Seq)
		if err != nil || string(m.Data) != string(raws[k]) {
			t.Fatalf("seq %d does not hold envelope %d: %v", r.Seq, k, err)
		}
	}
	if n := streamMsgs(t, st); n != appenders*each {
		t.Fatalf("stream holds %d messages, want %d", n, appenders*each)
	}
	if s := a.CommitStats(); s.Envelopes != appenders*each || s.Fallbacks != 0 || s.Batches < appenders*each/16 {
		t.Fatalf("commit stats %+v, want every envelope in atomic batches of at most 16", s)
	}
}

// TestGroupCommitDuplicateWhileBatchesInFlight: a batch refused for a
// member stored before (by another Appender) is redone while the batches
// after it are in flight: every other envelope is stored once, at the
// sequence it is answered, and the member is answered as a verified
// duplicate of the first copy. Answers keep input order.
func TestGroupCommitDuplicateWhileBatchesInFlight(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	const n, dup = 600, 150
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(idf("dupflight", i), "bob").raw()
	}
	first := newAppender(t, js, appendlog.AppenderOptions{})
	if r := mustAppend(t, first, "", raws[dup]); r.Seq != 1 {
		t.Fatalf("first copy: %+v", r)
	}

	a := newAppender(t, js, appendlog.AppenderOptions{Commit: inflightCommit})
	rs := a.AppendMany(ctx, "", raws)
	seen := map[uint64]int{1: dup}
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("envelope %d: %v", i, r.Err)
		}
		if i == dup {
			if !r.Duplicate || r.Seq != 1 {
				t.Fatalf("envelope %d: %+v, want a duplicate of seq 1", i, r)
			}
			continue
		}
		if r.Duplicate || r.Seq < 2 {
			t.Fatalf("envelope %d: %+v, want stored", i, r)
		}
		if j, ok := seen[r.Seq]; ok {
			t.Fatalf("seq %d answered to envelopes %d and %d", r.Seq, j, i)
		}
		seen[r.Seq] = i
		m, err := st.GetMsg(ctx, r.Seq)
		if err != nil || string(m.Data) != string(raws[i]) {
			t.Fatalf("seq %d does not hold envelope %d: %v", r.Seq, i, err)
		}
	}
	if got := streamMsgs(t, st); got != n {
		t.Fatalf("stream holds %d messages, want %d", got, n)
	}
	if s := a.CommitStats(); s.Fallbacks == 0 || s.Envelopes+s.Plain != n-1 {
		t.Fatalf("commit stats %+v, want a refused batch and %d envelopes stored", s, n-1)
	}
}

// TestGroupCommitDropWithBatchesInFlight: the connection is cut while
// several batches are outstanding (stored, their acks held back): every
// envelope is answered with its own sequence holding its bytes, none is
// stored twice, and nothing is answered that the stream does not hold.
//
// What is certain at the cut, whatever the machine's load: 48 envelopes
// stored in batches of at most 16 with every ack held back is at least
// three batches sent and unanswered, and the committer resolves batches
// in order, so at least two of them are still awaited (the first may
// already have timed out). After the cut, each of those is either given
// up on (its ack lost: every member published again on its own, answered
// as a duplicate) or answered by its ack after all (the server answers a
// commit after its fsync, to the reply subject, which the reconnected
// connection subscribes again): which one is timing, so the test asserts
// the outcome both must give, and that the first batch was given up on.
func TestGroupCommitDropWithBatchesInFlight(t *testing.T) {
	_, st, px, js := proxied(t, false)
	// A batch given up on before the cut has its members published alone
	// while the acks are still held: 20 retries (the most the duplicate
	// window allows, ~49 s worst case) outlast a loaded machine's slow
	// path to the cut.
	a := newAppender(t, js, appendlog.AppenderOptions{AckTimeout: 300 * time.Millisecond, MaxRetries: 20, RetryWait: 20 * time.Millisecond,
		Commit: inflightCommit})
	const n = 400
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(idf("dropflight", i), "carol").raw()
	}
	ctx := ctxT(t)
	px.Hold()
	done := make(chan []ledger.Result, 1)
	go func() { done <- a.AppendMany(ctx, "", raws) }()
	waitMsgs(t, st, 48, nil) // three batches stored, their acks held back, more sent
	if k := appendlog.Awaiting(a); k < 2 {
		px.Cut()
		t.Fatalf("%d batches awaited at the cut, want at least 2 (stats %+v)", k, a.CommitStats())
	}
	loseAcks(t, px, a)
	rs := <-done
	seen := map[uint64]int{}
	for i, r := range rs {
		if r.Err != nil || r.Seq == 0 {
			t.Fatalf("envelope %d: %+v", i, r)
		}
		if j, ok := seen[r.Seq]; ok {
			t.Fatalf("seq %d answered to envelopes %d and %d", r.Seq, j, i)
		}
		seen[r.Seq] = i
		m, err := st.GetMsg(ctx, r.Seq)
		if err != nil || string(m.Data) != string(raws[i]) {
			t.Fatalf("seq %d does not hold envelope %d: %v", r.Seq, i, err)
		}
	}
	if got := streamMsgs(t, st); got != n {
		t.Fatalf("stream holds %d messages, want %d (stored twice or lost)", got, n)
	}
	if s := a.CommitStats(); s.Fallbacks < 1 {
		t.Fatalf("commit stats %+v: want the first batch given up on", s)
	}
}
