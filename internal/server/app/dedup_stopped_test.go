package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apitest"
)

// Writes do not depend on the reader (issue 35): while the projection is
// stopped, appends are accepted, and a retry is still a duplicate for ever
// (the log's per-subject index answers for what the projection has not
// folded); nothing is stored twice.

// threadProposal is a proposal filed under correlation key thread: every
// one of them from agent-a lands on the same subject.
func threadProposal(id, thread string) []byte {
	return dedupEnv(id, "mcp/proposal", fmt.Sprintf(`,"correlation_id":[%q]`, thread))
}

// pauseProjector pauses a's projector until the test ends (or resume).
func pauseProjector(t *testing.T, a *app.App) (resume func()) {
	t.Helper()
	a.Projector().Pause()
	var once sync.Once
	resume = func() { once.Do(a.Projector().Resume) }
	t.Cleanup(resume)
	return resume
}

// appendedOK fails unless r is a fresh append (stored, not a duplicate).
func appendedOK(t *testing.T, what string, r api.AppendResult, err error) uint64 {
	t.Helper()
	if err != nil || r.Error != nil || r.Duplicate || r.Seq == 0 {
		t.Fatalf("%s: %+v (error %v, %v), want stored", what, r, r.Error, err)
	}
	return r.Seq
}

func TestProjectorStoppedAppendsAccepted(t *testing.T) {
	a := startDedup(t, "")
	c := newClient(t, a)
	sub := dialSubmit(t, a)
	ctx := context.Background()

	r, err := c.Publish(ctx, "", dedupProposal("ps-1"))
	before := appendedOK(t, "ps-1", r, err)
	if err := a.Store().WaitApplied(ctx, before); err != nil {
		t.Fatal(err)
	}
	resume := pauseProjector(t, a)

	// Appended while the projector is stopped, through every path; three
	// of them on one subject.
	r, err = c.Publish(ctx, "", dedupProposal("ps-2"))
	seq2 := appendedOK(t, "ps-2", r, err)
	r, err = sub.Submit(ctx, "", dedupProposal("ps-3"))
	seq3 := appendedOK(t, "ps-3", r, err)
	thread, err := c.PublishLines(ctx, "", [][]byte{threadProposal("ps-t1", "th"), threadProposal("ps-t2", "th"), threadProposal("ps-t3", "th")})
	if err != nil || len(thread) != 3 {
		t.Fatalf("thread: %+v %v", thread, err)
	}
	for i, r := range thread {
		appendedOK(t, fmt.Sprintf("thread line %d", i+1), r, nil)
	}

	// JetStream forgets them; the projection has folded none of them.
	time.Sleep(2 * testDupWindow)
	msgs, _ := streamState(t, a)
	lookups := a.Appender().CommitStats().LogLookups

	// New envelopes are accepted, nothing waits for the projector.
	r, err = c.Publish(ctx, "", dedupProposal("ps-new-1"))
	appendedOK(t, "new single", r, err)
	r, err = sub.Submit(ctx, "", dedupProposal("ps-new-2"))
	appendedOK(t, "new via the submit service", r, err)
	r, err = c.Publish(ctx, "", threadProposal("ps-t4", "th")) // a subject with messages above the checkpoint
	appendedOK(t, "new on the thread's subject", r, err)

	// Retries, alone and mixed with new ones in a group, are duplicates
	// at the sequence first stored.
	r, err = c.Publish(ctx, "", dedupProposal("ps-2"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "HTTP single retry", r, seq2)
	r, err = sub.Submit(ctx, "", dedupProposal("ps-3"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "submit service retry", r, seq3)
	res, err := c.PublishLines(ctx, "", [][]byte{threadProposal("ps-t2", "th"), dedupProposal("ps-new-3"), dedupProposal("ps-1"), threadProposal("ps-t1", "th"), threadProposal("ps-t3", "th")})
	if err != nil || len(res) != 5 {
		t.Fatalf("group: %+v %v", res, err)
	}
	wantDup(t, "group line 1 (middle of a subject)", res[0], thread[1].Seq)
	appendedOK(t, "group line 2", res[1], nil)
	wantDup(t, "group line 3 (folded before the pause)", res[2], before)
	wantDup(t, "group line 4 (first of a subject)", res[3], thread[0].Seq)
	wantDup(t, "group line 5 (last before ps-t4)", res[4], thread[2].Seq)
	batch := submitBatch(t, a, dedupProposal("ps-2"), threadProposal("ps-t1", "th"))
	if len(batch) != 2 {
		t.Fatalf("submit batch: %+v", batch)
	}
	wantDup(t, "submit batch line 1", batch[0], seq2)
	wantDup(t, "submit batch line 2", batch[1], thread[0].Seq)

	// Concurrent retries of one envelope: all duplicates.
	var wg sync.WaitGroup
	out := make([]api.AppendResult, 16)
	errs := make([]error, len(out))
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = c.Publish(ctx, "", threadProposal("ps-t2", "th"))
		}()
	}
	wg.Wait()
	for i := range out {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		wantDup(t, fmt.Sprintf("concurrent retry %d", i), out[i], thread[1].Seq)
	}

	after, _ := streamState(t, a)
	if after != msgs+4 {
		t.Errorf("stream holds %d messages, want %d (the 4 new ones)", after, msgs+4)
	}
	if st := a.Appender().CommitStats(); st.LogLookups <= lookups {
		t.Errorf("commit stats %+v: no lookup in the log while the projector was stopped", st)
	}

	// The projector resumes and folds everything once.
	resume()
	_, last := streamState(t, a)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := a.Store().WaitApplied(wctx, last); err != nil {
		t.Fatal(err)
	}
	p, _, err := c.Get(ctx, "ps-t2", apitest.ReadOptions{MinSeq: last})
	if err != nil {
		t.Fatal(err)
	}
	if p.Events != 1 {
		t.Errorf("ps-t2 has %d events, want 1", p.Events)
	}
}

// Appends and retries while an online rebuild folds a new projection and
// swaps it in (the projector paused, then stopped, the index closed and
// reopened): none refused, every retry a duplicate, nothing stored twice.
func TestAppendsDuringRebuild(t *testing.T) {
	a := startDedup(t, "")
	c := newClient(t, a)
	ctx := context.Background()
	const old = 30
	lines := make([][]byte, old)
	for i := range lines {
		lines[i] = dedupProposal(fmt.Sprintf("rb-%d", i))
	}
	first, err := c.PublishLines(ctx, "", lines)
	if err != nil || len(first) != old {
		t.Fatalf("first: %+v %v", first, err)
	}
	forget(t, a)
	msgs, _ := streamState(t, a)

	if _, err := a.StartRebuild(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	var news []api.AppendResult
	newLines := [][]byte{}
	for round := 0; round == 0 || a.RebuildStatus().Running; round++ {
		if time.Now().After(deadline) {
			t.Fatal("the rebuild did not finish in 2 minutes")
		}
		// A retry of every old envelope, and a new one, in one request; a
		// retry of the new ones so far one by one.
		nl := dedupProposal(fmt.Sprintf("rb-new-%d", round))
		res, err := c.PublishLines(ctx, "", append(append([][]byte{}, lines...), nl))
		if err != nil || len(res) != old+1 {
			t.Fatalf("round %d: %+v %v", round, res, err)
		}
		for i := range old {
			wantDup(t, fmt.Sprintf("round %d line %d", round, i+1), res[i], first[i].Seq)
		}
		appendedOK(t, fmt.Sprintf("round %d new", round), res[old], nil)
		news, newLines = append(news, res[old]), append(newLines, nl)
		for i, l := range newLines {
			r, err := c.Publish(ctx, "", l)
			if err != nil {
				t.Fatal(err)
			}
			wantDup(t, fmt.Sprintf("round %d retry of new %d", round, i), r, news[i].Seq)
		}
	}
	if st := a.RebuildStatus(); st.Error != "" {
		t.Fatalf("rebuild: %+v", st)
	}
	after, _ := streamState(t, a)
	if after != msgs+uint64(len(news)) {
		t.Errorf("stream holds %d messages, want %d", after, msgs+uint64(len(news)))
	}
	// After the window, on the new projection.
	forget(t, a)
	r, err := c.Publish(ctx, "", newLines[len(newLines)-1])
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "after the rebuild", r, news[len(news)-1].Seq)
}
