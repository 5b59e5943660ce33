package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/subjects"
)

// A retry is a duplicate for ever, on every append path (contract §4, issue
// 23 item 8): after the stream's duplicate window, after a restart, after
// a rebuild. The ledgers here run with a 1s window, so that JetStream has
// forgotten an envelope's Nats-Msg-Id after forget(); only the projection
// can answer then.

const testDupWindow = time.Second

func dedupEnv(id, kind, extra string) []byte {
	return []byte(fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":"agent-a","to":["fs-agent"],"kind":%q%s,"payload":{"method":"tools/call","params":{"name":"write_file"}}}`, id, kind, extra))
}

func dedupProposal(id string) []byte { return dedupEnv(id, "mcp/proposal", "") }

// startDedup runs a ledger with the short duplicate window on dir ("":
// a fresh one).
func startDedup(t *testing.T, dir string, edits ...func(*app.Options)) *app.App {
	t.Helper()
	return apptest.Start(t, append([]func(*app.Options){func(o *app.Options) {
		if dir != "" {
			o.DataDir = dir
		}
		o.DupWindow = testDupWindow
	}}, edits...)...)
}

// streamState returns the LEDGER stream's message count and last sequence.
func streamState(t *testing.T, a *app.App) (msgs, last uint64) {
	t.Helper()
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	st, err := a.JetStream().Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Duplicates != testDupWindow {
		t.Fatalf("stream duplicate window %v, want the --dup-window %v", info.Config.Duplicates, testDupWindow)
	}
	return info.State.Msgs, info.State.LastSeq
}

// forget waits until JetStream's duplicate window has passed for
// everything stored so far, and the projection has folded it all.
func forget(t *testing.T, a *app.App) {
	t.Helper()
	_, last := streamState(t, a)
	time.Sleep(2 * testDupWindow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Store().WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
}

func wantDup(t *testing.T, what string, r api.AppendResult, seq uint64) {
	t.Helper()
	if r.Error != nil || !r.Duplicate || r.Seq != seq {
		t.Errorf("%s: %+v (error %v), want duplicate:true at seq %d", what, r, r.Error, seq)
	}
}

func dialSubmit(t *testing.T, a *app.App) *submit.Submitter {
	t.Helper()
	s, err := submit.DialSubmitter(context.Background(), a.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// submitBatch sends lines as one NDJSON batch request to the submit
// service and returns its results.
func submitBatch(t *testing.T, a *app.App, lines ...[]byte) []api.AppendResult {
	t.Helper()
	nc, _ := natstest.ConnectURL(t, a.NATSURL())
	m := nats.NewMsg(subjects.Submit(app.DefaultSpace))
	m.Header.Set(submit.HeaderContentType, "application/x-ndjson")
	m.Data = bytes.Join(lines, []byte("\n"))
	msg, err := nc.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var out []api.AppendResult
	dec := json.NewDecoder(bytes.NewReader(msg.Data))
	for dec.More() {
		var r api.AppendResult
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("batch reply %q: %v", msg.Data, err)
		}
		out = append(out, r)
	}
	return out
}

func TestRetryIsDuplicateForEverOnEveryPath(t *testing.T) {
	a := startDedup(t, "")
	c := newClient(t, a)
	sub := dialSubmit(t, a)
	ctx := context.Background()

	single, err := c.Publish(ctx, "", dedupProposal("dd-http"))
	if err != nil || single.Duplicate {
		t.Fatalf("first single append: %+v %v", single, err)
	}
	lines, err := c.PublishLines(ctx, "", [][]byte{dedupProposal("dd-nd-1"), dedupProposal("dd-nd-2")})
	if err != nil || len(lines) != 2 || lines[0].Duplicate || lines[1].Duplicate {
		t.Fatalf("first NDJSON append: %+v %v", lines, err)
	}
	viaNATS, err := sub.Submit(ctx, "", dedupProposal("dd-submit"))
	if err != nil || viaNATS.Error != nil || viaNATS.Duplicate {
		t.Fatalf("first submit: %+v %v", viaNATS, err)
	}
	msgs, _ := streamState(t, a)
	// Answered without a publish: from the projection, or from the
	// appender's own recent appends (the same process stored them).
	answered := func() int64 { s := a.Appender().CommitStats(); return s.Known + s.Recent }
	known := answered()

	forget(t, a)

	// Each path, with envelopes first stored through another path too.
	r, err := c.Publish(ctx, "", dedupProposal("dd-http"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "HTTP single", r, single.Seq)
	r, err = c.Publish(ctx, "", dedupProposal("dd-submit"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "HTTP single, first stored by the submit service", r, viaNATS.Seq)
	// NDJSON: known lines and a new one in one request, answered in order.
	again, err := c.PublishLines(ctx, "", [][]byte{dedupProposal("dd-nd-1"), dedupProposal("dd-new"), dedupProposal("dd-nd-2"), dedupProposal("dd-http")})
	if err != nil || len(again) != 4 {
		t.Fatalf("NDJSON again: %+v %v", again, err)
	}
	wantDup(t, "NDJSON line 1", again[0], lines[0].Seq)
	if again[1].Error != nil || again[1].Duplicate || again[1].Seq <= single.Seq {
		t.Errorf("NDJSON new line: %+v", again[1])
	}
	wantDup(t, "NDJSON line 3", again[2], lines[1].Seq)
	wantDup(t, "NDJSON line 4", again[3], single.Seq)
	r, err = sub.Submit(ctx, "", dedupProposal("dd-submit"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "submit service", r, viaNATS.Seq)
	r, err = sub.Submit(ctx, "", dedupProposal("dd-nd-2"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "submit service, first stored by NDJSON", r, lines[1].Seq)

	after, _ := streamState(t, a)
	if after != msgs+1 {
		t.Errorf("stream holds %d messages, want %d (only dd-new added)", after, msgs+1)
	}
	if n := answered() - known; n != 7 {
		t.Errorf("%d envelopes answered without a publish, want 7", n)
	}
	p, _, err := c.Get(ctx, "dd-http", apitest.ReadOptions{MinSeq: again[1].Seq})
	if err != nil {
		t.Fatal(err)
	}
	if p.Events != 1 {
		t.Errorf("dd-http has %d events, want 1", p.Events)
	}
}

func TestRetryIsDuplicateAfterRestartAndRebuild(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a := startDedup(t, dir)
	first, err := newClient(t, a).PublishLines(ctx, "", [][]byte{dedupProposal("rr-1"), dedupProposal("rr-2")})
	if err != nil || len(first) != 2 {
		t.Fatalf("first: %+v %v", first, err)
	}
	_, last := streamState(t, a)
	if err := a.Store().WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted: JetStream rebuilds its duplicate map from the last window
	// of the stream; once that has passed, the projection answers.
	a = startDedup(t, dir)
	c := newClient(t, a)
	forget(t, a)
	// A fresh appender has sent nothing: the known envelopes and the new
	// one form one group, looked up in one call; the known ones are
	// answered in their places, the new one stored.
	res, err := c.PublishLines(ctx, "", [][]byte{dedupProposal("rr-1"), dedupProposal("rr-new"), dedupProposal("rr-2")})
	if err != nil || len(res) != 3 {
		t.Fatalf("after a restart: %+v %v", res, err)
	}
	wantDup(t, "after a restart, line 1", res[0], first[0].Seq)
	if res[1].Error != nil || res[1].Duplicate || res[1].Seq != last+1 {
		t.Errorf("after a restart, new line: %+v, want stored at %d", res[1], last+1)
	}
	wantDup(t, "after a restart, line 3", res[2], first[1].Seq)
	if st := a.Appender().CommitStats(); st.Known != 2 {
		t.Errorf("commit stats %+v, want 2 known", st)
	}
	r, err := c.Publish(ctx, "", dedupProposal("rr-1"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "after a restart, single", r, first[0].Seq)
	// A batch request of the submit service.
	batch := submitBatch(t, a, dedupProposal("rr-2"), dedupProposal("rr-new"), dedupProposal("rr-1"))
	if len(batch) != 3 {
		t.Fatalf("submit batch: %+v", batch)
	}
	wantDup(t, "submit batch, line 1", batch[0], first[1].Seq)
	wantDup(t, "submit batch, line 2", batch[1], res[1].Seq)
	wantDup(t, "submit batch, line 3", batch[2], first[0].Seq)

	// An online rebuild folds a new projection and swaps it in.
	if _, err := a.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	forget(t, a)
	r, err = c.Publish(ctx, "", dedupProposal("rr-2"))
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "after an online rebuild", r, first[1].Seq)
	if msgs, _ := streamState(t, a); msgs != 3 {
		t.Errorf("stream holds %d messages, want 3", msgs)
	}
}

// A different envelope under an id already used is a new envelope: stored
// (and flagged by the fold), not answered as a duplicate; the retries of
// both are duplicates for ever, the superseded one's included.
func TestSameIDOtherEnvelopeIsStored(t *testing.T) {
	a := startDedup(t, "")
	c := newClient(t, a)
	ctx := context.Background()
	prop, err := c.Publish(ctx, "", dedupProposal("sid-p"))
	if err != nil {
		t.Fatal(err)
	}
	chat1 := []byte(`{"protocol":"mew/v0.4","id":"sid-chat","from":"agent-a","kind":"chat","correlation_id":["sid-p"],"payload":{"text":"one"}}`)
	chat2 := []byte(`{"protocol":"mew/v0.4","id":"sid-chat","from":"agent-a","kind":"chat","correlation_id":["sid-p"],"payload":{"text":"two"}}`)
	r1, err := c.Publish(ctx, "", chat1)
	if err != nil || r1.Duplicate {
		t.Fatalf("chat one: %+v %v", r1, err)
	}
	forget(t, a)
	r2, err := c.Publish(ctx, "", chat2)
	if err != nil || r2.Duplicate || r2.Seq <= r1.Seq {
		t.Fatalf("chat two, same id, other bytes: %+v %v, want stored", r2, err)
	}
	h, _, err := c.History(ctx, "sid-p", apitest.ReadOptions{MinSeq: r2.Seq})
	if err != nil {
		t.Fatal(err)
	}
	flagged := false
	for _, e := range h.Events {
		if e.Seq == r2.Seq && strings.Contains(strings.Join(e.Anomalies, ","), "id_reused") {
			flagged = true
		}
	}
	if !flagged {
		t.Errorf("the reused id is not flagged in the history: %+v", h.Events)
	}
	forget(t, a)
	r, err := c.Publish(ctx, "", chat1)
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "the superseded envelope again", r, r1.Seq)
	r, err = c.Publish(ctx, "", chat2)
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "the reusing envelope again", r, r2.Seq)
	if msgs, _ := streamState(t, a); msgs != 3 || prop.Seq != 1 {
		t.Errorf("stream holds %d messages, want 3", msgs)
	}
}

// Copies of one envelope arriving together are stored once: in one
// group (one NDJSON request) and from concurrent callers; before and
// after the window.
func TestConcurrentRetriesStoredOnce(t *testing.T) {
	a := startDedup(t, "")
	c := newClient(t, a)
	ctx := context.Background()
	env := dedupProposal("cc-1")
	same := make([][]byte, 8)
	for i := range same {
		same[i] = env
	}
	res, err := c.PublishLines(ctx, "", same)
	if err != nil || len(res) != len(same) {
		t.Fatalf("%+v %v", res, err)
	}
	seq := res[0].Seq
	dups := 0
	for i, r := range res {
		if r.Error != nil || r.Seq != seq {
			t.Errorf("line %d: %+v, want seq %d", i+1, r, seq)
		}
		if r.Duplicate {
			dups++
		}
	}
	if dups != len(same)-1 {
		t.Errorf("%d duplicates, want %d", dups, len(same)-1)
	}
	for round := range 2 {
		if round == 1 {
			forget(t, a)
		}
		var wg sync.WaitGroup
		out := make([]api.AppendResult, 16)
		errs := make([]error, len(out))
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i], errs[i] = c.Publish(ctx, "", env)
			}()
		}
		wg.Wait()
		for i := range out {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			wantDup(t, fmt.Sprintf("round %d caller %d", round, i), out[i], seq)
		}
	}
	// The same lines in one group after the window.
	res, err = c.PublishLines(ctx, "", same)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		wantDup(t, fmt.Sprintf("group line %d", i+1), r, seq)
	}
	if msgs, _ := streamState(t, a); msgs != 1 {
		t.Errorf("stream holds %d messages, want 1", msgs)
	}
}

// The Nats-Msg-Id clash rule with the projection as the index: other bytes
// stored first under an envelope's (predictable) Nats-Msg-Id do not
// swallow it: it is stored under a derived id and flagged msg_id_clash;
// once the window has passed, appending it again is a duplicate of that
// copy, answered by the projection.
func TestMsgIDClashStillStoredWithIndex(t *testing.T) {
	a := startDedup(t, "")
	c := newClient(t, a)
	ctx := context.Background()
	raw := dedupProposal("clash-1")
	p, err := a.Appender().Prepare("", raw)
	if err != nil {
		t.Fatal(err)
	}
	squat := nats.NewMsg(p.Subject)
	squat.Data = []byte("squatted")
	squat.Header.Set(jetstream.MsgIDHeader, p.MsgID)
	if _, err := a.JetStream().PublishMsg(ctx, squat); err != nil {
		t.Fatal(err)
	}
	r, err := c.Publish(ctx, "", raw)
	if err != nil || r.Duplicate || r.Seq != 2 {
		t.Fatalf("append after the squat: %+v %v, want stored at 2", r, err)
	}
	prop, _, err := c.Get(ctx, "clash-1", apitest.ReadOptions{MinSeq: r.Seq})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(prop.Anomalies, ","), "msg_id_clash") {
		t.Errorf("anomalies %v, want msg_id_clash", prop.Anomalies)
	}
	forget(t, a)
	again, err := c.Publish(ctx, "", raw)
	if err != nil {
		t.Fatal(err)
	}
	wantDup(t, "the clashing envelope again", again, r.Seq)
	if msgs, _ := streamState(t, a); msgs != 2 {
		t.Errorf("stream holds %d messages, want 2", msgs)
	}
}
