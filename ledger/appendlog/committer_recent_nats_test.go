package appendlog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// TestRecentDuplicateAnsweredFromOwnAppend: an envelope this appender
// stored a moment ago, appended again, is answered duplicate with the
// sequence of the stored copy without a publish; the same id with other
// content is not a duplicate of it (another Nats-Msg-Id) and takes the
// ordinary path.
func TestRecentDuplicateAnsweredFromOwnAppend(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	raw := tProposal("recent-1", "alice").raw()
	first, err := a.Append(ctx, "", raw)
	if err != nil || first.Duplicate || first.Seq == 0 {
		t.Fatalf("first append: %+v %v", first, err)
	}
	again, err := a.Append(ctx, "", raw)
	if err != nil || !again.Duplicate || again.Seq != first.Seq || again.ID != first.ID || again.Subject != first.Subject {
		t.Fatalf("again: %+v %v, want duplicate of %+v", again, err, first)
	}
	if s := a.CommitStats(); s.Recent != 1 {
		t.Fatalf("commit stats %+v, want one answered from the recent appends", s)
	}
	other := tProposal("recent-1", "alice")
	other["payload"].(map[string]any)["method"] = "tools/list"
	r, err := a.Append(ctx, "", other.raw())
	if err != nil || r.Duplicate || r.Seq == first.Seq {
		t.Fatalf("same id, other content: %+v %v", r, err)
	}
	if s := a.CommitStats(); s.Recent != 1 {
		t.Fatalf("commit stats %+v: the other content was answered from the recent appends", s)
	}
	if n := streamMsgs(t, st); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
}

// TestRecordersAppendSameEnvelopes: three callers append the same
// envelopes concurrently (three recorders of one MEW space): each is
// stored once; exactly one caller is answered stored, the two others
// duplicate with its sequence, and the message stored there is it.
func TestRecordersAppendSameEnvelopes(t *testing.T) {
	const recorders, n = 3, 400
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(fmt.Sprintf("rec-%d", i), "alice").raw()
	}
	results := make([][]ledger.Result, recorders)
	var wg sync.WaitGroup
	for g := range recorders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i += 20 {
				results[g] = append(results[g], a.AppendMany(ctx, "", raws[i:min(i+20, n)])...)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		stored, seq := 0, uint64(0)
		for g := range recorders {
			r := results[g][i]
			if r.Err != nil || r.Seq == 0 {
				t.Fatalf("recorder %d, envelope %d: %+v", g, i, r)
			}
			if !r.Duplicate {
				stored++
			}
			if seq != 0 && r.Seq != seq {
				t.Fatalf("envelope %d answered seq %d and %d", i, seq, r.Seq)
			}
			seq = r.Seq
		}
		if stored != 1 {
			t.Fatalf("envelope %d answered stored %d times", i, stored)
		}
		m, err := st.GetMsg(ctx, seq)
		if err != nil || string(m.Data) != string(raws[i]) {
			t.Fatalf("seq %d does not hold envelope %d: %v", seq, i, err)
		}
	}
	if got := streamMsgs(t, st); got != n {
		t.Fatalf("stream holds %d messages, want %d", got, n)
	}
	t.Logf("commit stats %+v", a.CommitStats())
}

// TestLateBatchResentAnsweredStored: every group an atomic batch; the
// first batch is stored but its ack is lost, so the committer sends its
// envelopes again one by one and the log answers them duplicate of the
// batch's copy: each caller is still answered stored (duplicate:false)
// at the sequence of its own first copy, nothing stored twice.
func TestLateBatchResentAnsweredStored(t *testing.T) {
	_, st, px, js := proxied(t, false)
	a := newAppender(t, js, appendlog.AppenderOptions{AckTimeout: 300 * time.Millisecond, MaxRetries: 8, RetryWait: 20 * time.Millisecond,
		Commit: appendlog.CommitOptions{MinAtomic: 1}})
	const n = 200
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(idf("late", i), "carol").raw()
	}
	px.Hold()
	done := make(chan []ledger.Result, 1)
	go func() { done <- a.AppendMany(context.Background(), "", raws) }()
	waitMsgs(t, st, 1, nil) // the first batch is stored, its ack held back
	loseAcks(t, px, a)
	rs := <-done
	seen := map[uint64]bool{}
	for i, r := range rs {
		if r.Err != nil || r.Seq == 0 || seen[r.Seq] || r.Duplicate {
			t.Fatalf("envelope %d: %+v, want stored at a sequence of its own", i, r)
		}
		seen[r.Seq] = true
		m, err := st.GetMsg(ctxT(t), r.Seq)
		if err != nil || string(m.Data) != string(raws[i]) {
			t.Fatalf("seq %d does not hold envelope %d: %v", r.Seq, i, err)
		}
	}
	if got := streamMsgs(t, st); got != n {
		t.Fatalf("stream holds %d messages, want %d", got, n)
	}
	if s := a.CommitStats(); s.Fallbacks == 0 || s.Resent == 0 {
		t.Fatalf("commit stats %+v: no batch sent again and found stored", s)
	}
}
