package appendlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// tenv is a test envelope; raw marshals it (keys sorted).
type tenv map[string]any

func (e tenv) raw() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b
}

func (e tenv) with(k string, v any) tenv {
	c := tenv{}
	for k2, v2 := range e {
		c[k2] = v2
	}
	c[k] = v
	return c
}

func idf(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

func tProposal(id, from string) tenv {
	return tenv{"protocol": "mew/v0.4", "id": id, "ts": "2026-01-02T03:04:05Z", "from": from,
		"to": []string{"fs-agent"}, "kind": "mcp/proposal",
		"payload": map[string]any{"method": "tools/call",
			"params": map[string]any{"name": "write_file", "arguments": map[string]any{"path": "/tmp/" + id}}}}
}

func tLifecycle(kind, id, from, target string, payload map[string]any) tenv {
	return tenv{"protocol": "mew/v0.4", "id": id, "ts": "2026-01-02T03:04:06Z", "from": from,
		"kind": kind, "correlation_id": []string{target}, "payload": payload}
}

func tWithdraw(id, from, target string) tenv {
	return tLifecycle("mcp/withdraw", id, from, target, map[string]any{"reason": "no_longer_needed"})
}

func tReject(id, from, target string) tenv {
	return tLifecycle("mcp/reject", id, from, target, map[string]any{"reason": "unsafe"})
}

func tFulfil(id, from, target string) tenv {
	return tLifecycle("mcp/request", id, from, target, map[string]any{"method": "tools/call",
		"params": map[string]any{"name": "write_file", "arguments": map[string]any{"path": "/tmp/" + target}}})
}

func newAppender(t testing.TB, js jetstream.JetStream, o appendlog.AppenderOptions) *appendlog.Appender {
	t.Helper()
	a, err := appendlog.NewAppender(js, o)
	if err != nil {
		t.Fatalf("NewAppender: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

func mustAppend(t *testing.T, a *appendlog.Appender, space string, raw []byte) ledger.Result {
	t.Helper()
	r, err := a.Append(ctxT(t), space, raw)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if r.Err != nil {
		t.Fatalf("Result.Err = %v with nil error", r.Err)
	}
	return r
}

func streamMsgs(t *testing.T, st jetstream.Stream) uint64 {
	t.Helper()
	info, err := st.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestAppendDuplicates(t *testing.T) {
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	p := tProposal("env-req-1", "untrusted-agent")

	r1 := mustAppend(t, a, "", p.raw())
	if r1.Seq != 1 || r1.Duplicate || r1.ID != "env-req-1" || r1.Attempts != 1 {
		t.Fatalf("first append = %+v", r1)
	}
	r2 := mustAppend(t, a, "", p.raw())
	if r2.Seq != 1 || !r2.Duplicate {
		t.Fatalf("same bytes again = %+v, want seq 1 duplicate", r2)
	}
	// The digest excludes ts: a retry with a fresh timestamp is the same event.
	r3 := mustAppend(t, a, "", p.with("ts", "2026-02-03T04:05:06Z").raw())
	if r3.Seq != 1 || !r3.Duplicate {
		t.Fatalf("same envelope, other ts = %+v, want seq 1 duplicate", r3)
	}
	// Same envelope, other key order and whitespace: same normalised form.
	reordered := []byte(`{ "kind":"mcp/proposal", "from":"untrusted-agent", "id":"env-req-1", "protocol":"mew/v0.4",
		"to":["fs-agent"], "payload":{"params":{"arguments":{"path":"/tmp/env-req-1"},"name":"write_file"},"method":"tools/call"} }`)
	if r := mustAppend(t, a, "", reordered); r.Seq != 1 || !r.Duplicate {
		t.Fatalf("reordered = %+v, want seq 1 duplicate", r)
	}
	// A different envelope reusing the id is stored, never swallowed.
	other := p.with("to", []string{"other-agent"})
	r4 := mustAppend(t, a, "", other.raw())
	if r4.Seq != 2 || r4.Duplicate {
		t.Fatalf("different envelope, same id = %+v, want seq 2 stored", r4)
	}
	// The same envelope in another space is another event.
	r5 := mustAppend(t, a, "space-b", p.raw())
	if r5.Seq != 3 || r5.Duplicate {
		t.Fatalf("same envelope, other space = %+v, want seq 3 stored", r5)
	}
	if n := streamMsgs(t, st); n != 3 {
		t.Fatalf("stream holds %d messages, want 3", n)
	}
}

// The stored message is the original bytes on the contract §4 subject with
// Nats-Msg-Id <space>/<id>/<digest>.
func TestStoredMessage(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{Space: "team.α"})
	cases := []struct {
		raw   []byte
		space string
		want  subjects.Event
	}{
		{tProposal("env-req-1", "untrusted-agent").raw(), "", subjects.Event{Space: "team.α", Key: "env-req-1", Type: "proposal", Sender: "untrusted-agent"}},
		{tWithdraw("w 1", "untrusted-agent", "env-req-1").raw(), "default", subjects.Event{Space: "default", Key: "env-req-1", Type: "withdraw", Sender: "untrusted-agent"}},
		{tReject("rej.2", "fs*agent", "env-req-1").raw(), "", subjects.Event{Space: "team.α", Key: "env-req-1", Type: "reject", Sender: "fs*agent"}},
		{tFulfil("ful-1", "human>user", "env-req-1").raw(), "", subjects.Event{Space: "team.α", Key: "env-req-1", Type: "fulfil", Sender: "human>user"}},
		// A note's key is correlation_id[0] (here a rejection id).
		{tLifecycle("chat", "c1", "fs-agent", "rej.2", map[string]any{"text": "path outside sandbox"}).raw(), "", subjects.Event{Space: "team.α", Key: "rej.2", Type: "note", Sender: "fs-agent"}},
		// Other dialects keep their bytes; the subject uses the canonical type.
		{[]byte(`{"protocol":"meup/v0.1","id":"old-1","from":"bob","kind":"mcp.withdraw","correlationId":"env-req-1","payload":{"reason":"busy"}}`), "", subjects.Event{Space: "team.α", Key: "env-req-1", Type: "withdraw", Sender: "bob"}},
	}
	for _, c := range cases {
		r := mustAppend(t, a, c.space, c.raw)
		if r.Duplicate {
			t.Fatalf("%s: duplicate", r.ID)
		}
		m, err := st.GetMsg(ctx, r.Seq)
		if err != nil {
			t.Fatalf("GetMsg(%d): %v", r.Seq, err)
		}
		if m.Subject != c.want.String() || r.Subject != m.Subject {
			t.Errorf("%s: subject %q (result %q), want %q", r.ID, m.Subject, r.Subject, c.want.String())
		}
		if ev, err := subjects.ParseEvent(m.Subject); err != nil || ev != c.want {
			t.Errorf("%s: subject parses to %+v, %v", r.ID, ev, err)
		}
		if string(m.Data) != string(c.raw) {
			t.Errorf("%s: stored bytes differ from the original", r.ID)
		}
		d, err := ledger.Decode(c.raw, ledger.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantID := c.want.Space + "/" + d.Env.ID + "/" + d.Digest
		if got := m.Header.Get(jetstream.MsgIDHeader); got != wantID || got != d.MsgID(c.want.Space) {
			t.Errorf("%s: Nats-Msg-Id %q, want %q", r.ID, got, wantID)
		}
		if got := m.Header.Get(jetstream.ExpectedStreamHeader); got != subjects.StreamName {
			t.Errorf("%s: Nats-Expected-Stream %q", r.ID, got)
		}
		if m.Time.IsZero() || time.Since(m.Time) > time.Minute {
			t.Errorf("%s: stream time %v", r.ID, m.Time)
		}
	}
}

func TestPrepareRefusals(t *testing.T) {
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{Limits: ledger.SubmitLimits{MaxTo: 2}})
	cases := map[string]struct {
		raw   []byte
		space string
		code  string
	}{
		"not json":      {[]byte(`{"id":`), "", api.CodeNotJSON},
		"no id":         {tProposal("x", "a").with("id", "").raw(), "", api.CodeMissingField},
		"not lifecycle": {tenv{"protocol": "mew/v0.4", "id": "c", "from": "a", "kind": "chat", "payload": map[string]any{"text": "hi"}}.raw(), "", api.CodeMissingCorrelation},
		"other kind":    {tenv{"protocol": "mew/v0.4", "id": "c", "from": "a", "kind": "presence"}.raw(), "", api.CodeNotLifecycle},
		"expire":        {ledger.ExpireEnvelope("default", "p1", time.Now()), "", api.CodeReservedKind},
		"too many to":   {tProposal("x", "a").with("to", []string{"a", "b", "c"}).raw(), "", api.CodeTooMany},
		"long space":    {tProposal("x", "a").raw(), strings.Repeat("s", 257), api.CodeTooLong},
		"bad space":     {tProposal("x", "a").raw(), "\xff", api.CodeInvalidUTF8},
	}
	for name, c := range cases {
		r, err := a.Append(ctxT(t), c.space, c.raw)
		rf, ok := ledger.AsRefusal(err)
		if !ok || rf.Code != c.code || !errors.Is(err, ledger.ErrRefused) || r.Err != err || r.Attempts != 0 {
			t.Errorf("%s: result %+v err %v, want refusal %s", name, r, err, c.code)
		}
	}
	// A refusal after decoding names the envelope.
	if r, _ := a.Append(ctxT(t), "", ledger.ExpireEnvelope("default", "p1", time.Now())); r.ID != "expire:default/p1" {
		t.Errorf("refused expire: ID %q", r.ID)
	}
	if n := streamMsgs(t, st); n != 0 {
		t.Fatalf("refusals stored %d messages", n)
	}
}

// AppendSystem writes the ledger's own ledger/expire events, which the
// submit paths refuse; the deterministic id makes a second write a
// duplicate.
func TestAppendSystem(t *testing.T) {
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	mustAppend(t, a, "", tProposal("p1", "alice").raw())
	exp := ledger.ExpireEnvelope("default", "p1", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	r, err := a.AppendSystem(ctxT(t), "", exp)
	if err != nil || r.Seq != 2 || r.Duplicate {
		t.Fatalf("AppendSystem = %+v, %v", r, err)
	}
	if want := (subjects.Event{Space: "default", Key: "p1", Type: "expire", Sender: ledger.LedgerSender}).String(); r.Subject != want {
		t.Fatalf("subject %q, want %q", r.Subject, want)
	}
	r, err = a.AppendSystem(ctxT(t), "", exp)
	if err != nil || r.Seq != 2 || !r.Duplicate {
		t.Fatalf("AppendSystem again = %+v, %v", r, err)
	}
	// A non-lifecycle kind is refused even on the system path.
	raw := tenv{"protocol": "mew/v0.4", "id": "c", "from": "a", "kind": "presence"}.raw()
	if _, err := a.AppendSystem(ctxT(t), "", raw); !errors.Is(err, ledger.ErrRefused) {
		t.Fatalf("AppendSystem(presence) err = %v", err)
	}
	if n := streamMsgs(t, st); n != 2 {
		t.Fatalf("stream holds %d, want 2", n)
	}
}

// padded returns a proposal of exactly n bytes.
func padded(t *testing.T, id string, n int) []byte {
	t.Helper()
	e := tProposal(id, "alice")
	base := len(e.with("payload", map[string]any{"method": "tools/call", "params": map[string]any{"blob": ""}}).raw())
	if n < base {
		t.Fatalf("cannot pad to %d < %d", n, base)
	}
	raw := e.with("payload", map[string]any{"method": "tools/call", "params": map[string]any{"blob": strings.Repeat("x", n-base)}}).raw()
	if len(raw) != n {
		t.Fatalf("padded to %d, want %d", len(raw), n)
	}
	return raw
}

func TestEnvelopeSizeLimit(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})

	at := padded(t, "big-1", ledger.MaxEnvelopeBytes)
	r := mustAppend(t, a, "", at)
	m, err := st.GetMsg(ctx, r.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) != ledger.MaxEnvelopeBytes || string(m.Data) != string(at) {
		t.Fatalf("stored %d bytes, want the %d original", len(m.Data), ledger.MaxEnvelopeBytes)
	}
	// The same size through AppendMany (async path).
	if rs := a.AppendMany(ctx, "", [][]byte{padded(t, "big-2", ledger.MaxEnvelopeBytes)}); rs[0].Err != nil {
		t.Fatalf("AppendMany 1 MiB: %v", rs[0].Err)
	}

	over := padded(t, "big-3", ledger.MaxEnvelopeBytes+1)
	_, err = a.Append(ctx, "", over)
	if rf, ok := ledger.AsRefusal(err); !ok || rf.Code != api.CodeOversize {
		t.Fatalf("1 MiB + 1: err = %v, want oversize refusal", err)
	}
	if n := streamMsgs(t, st); n != 2 {
		t.Fatalf("stream holds %d, want 2", n)
	}
}

// mixed builds n envelopes: mostly valid lifecycle events, every 50th a
// refusal of a rotating kind, every 97th a repeat of an earlier envelope.
type expect struct {
	code string // refusal code, "" for stored
	dup  bool
}

func mixed(n int) ([][]byte, []expect) {
	raws := make([][]byte, n)
	want := make([]expect, n)
	refusals := []struct {
		code string
		raw  func(i int) []byte
	}{
		{api.CodeNotJSON, func(i int) []byte { return []byte("not json") }},
		{api.CodeMissingField, func(i int) []byte { return tProposal(idf("x", i), "a").with("from", "").raw() }},
		{api.CodeMissingCorrelation, func(i int) []byte {
			return tenv{"protocol": "mew/v0.4", "id": idf("r", i), "from": "a", "kind": "mcp/request", "payload": map[string]any{"method": "tools/call"}}.raw()
		}},
		{api.CodeReservedKind, func(i int) []byte { return ledger.ExpireEnvelope("default", idf("p", i), time.Unix(0, 0)) }},
		{api.CodeUnknownProtocol, func(i int) []byte { return tProposal(idf("x", i), "a").with("protocol", "mew/v9").raw() }},
	}
	for i := range n {
		switch {
		case i%50 == 49:
			rf := refusals[(i/50)%len(refusals)]
			raws[i], want[i] = rf.raw(i), expect{code: rf.code}
		case i%97 == 96:
			raws[i], want[i] = raws[i-10], expect{dup: want[i-10].code == ""}
			if want[i-10].code != "" {
				want[i] = want[i-10]
			}
		default:
			p := idf("p", i-i%4)
			switch i % 4 {
			case 0:
				raws[i] = tProposal(p, idf("agent", i%7)).raw()
			case 1:
				raws[i] = tReject(idf("rej", i), "fs-agent", p).raw()
			case 2:
				raws[i] = tFulfil(idf("ful", i), "human", p).raw()
			case 3:
				raws[i] = tWithdraw(idf("wd", i), idf("agent", (i-3)%7), p).raw()
			}
		}
	}
	return raws, want
}

// TestAppendMany appends 5,000 mixed envelopes, on a server that fsyncs
// every write (the product default) and on one that fsyncs in the
// background, and logs the throughput of each.
func TestAppendMany(t *testing.T) {
	t.Run("sync_always", func(t *testing.T) { testAppendMany(t, natstest.Options(t)) })
	t.Run("sync_interval", func(t *testing.T) {
		o := natstest.Options(t)
		o.SyncInterval = time.Minute
		testAppendMany(t, o)
	})
}

func testAppendMany(t *testing.T, o natsserver.Options) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJSWith(t, o)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	const n = 5000
	raws, want := mixed(n)

	start := time.Now()
	rs := a.AppendMany(ctx, "", raws)
	elapsed := time.Since(start)
	if len(rs) != n {
		t.Fatalf("%d results for %d inputs", len(rs), n)
	}
	var stored, refused, dups uint64
	var lastSeq uint64
	seen := map[uint64]int{}
	for i, r := range rs {
		w := want[i]
		switch {
		case w.code != "":
			rf, ok := ledger.AsRefusal(r.Err)
			if !ok || rf.Code != w.code {
				t.Fatalf("input %d: %+v, want refusal %s", i, r, w.code)
			}
			refused++
		case r.Err != nil:
			t.Fatalf("input %d: %v", i, r.Err)
		case w.dup:
			if !r.Duplicate || r.Seq != rs[i-10].Seq {
				t.Fatalf("input %d: %+v, want duplicate of seq %d", i, r, rs[i-10].Seq)
			}
			dups++
		default:
			if r.Duplicate {
				t.Fatalf("input %d: unexpected duplicate %+v", i, r)
			}
			// Sent in input order, with no retries: stored in input order.
			if r.Seq <= lastSeq {
				t.Fatalf("input %d: seq %d after %d", i, r.Seq, lastSeq)
			}
			if j, ok := seen[r.Seq]; ok {
				t.Fatalf("inputs %d and %d both at seq %d", j, i, r.Seq)
			}
			seen[r.Seq], lastSeq = i, r.Seq
			stored++
		}
	}
	if got := streamMsgs(t, st); got != stored || lastSeq != stored {
		t.Fatalf("stream holds %d messages, last seq %d, %d stored", got, lastSeq, stored)
	}
	if refused == 0 || dups == 0 {
		t.Fatalf("test data has %d refusals and %d duplicates", refused, dups)
	}
	// Spot-check that results point at the right stored envelopes.
	for _, i := range []int{0, 1, 2, 3, 1234, n - 1} {
		if rs[i].Err != nil {
			continue
		}
		m, err := st.GetMsg(ctx, rs[i].Seq)
		if err != nil || string(m.Data) != string(raws[i]) {
			t.Fatalf("input %d: seq %d holds other bytes (%v)", i, rs[i].Seq, err)
		}
	}
	t.Logf("AppendMany: %d envelopes (%d stored, %d duplicates, %d refused) in %v (%.0f/s)",
		n, stored, dups, refused, elapsed, float64(n)/elapsed.Seconds())
}

// AppendMany from several goroutines at once on one Appender.
func TestAppendManyConcurrent(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{MaxInFlight: 16})
	var wg sync.WaitGroup
	const workers, per = 4, 200
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raws := make([][]byte, per)
			for i := range raws {
				raws[i] = tProposal(fmt.Sprintf("w%d-%d", w, i), "alice").raw()
			}
			for i, r := range a.AppendMany(ctx, "", raws) {
				if r.Err != nil || r.Duplicate || r.Attempts != 1 || r.ID != fmt.Sprintf("w%d-%d", w, i) {
					t.Errorf("worker %d input %d: %+v", w, i, r)
				}
			}
		}()
	}
	wg.Wait()
	if n := streamMsgs(t, st); n != workers*per {
		t.Fatalf("stream holds %d, want %d", n, workers*per)
	}
}

// A publish with no stream to answer is retried with the same Nats-Msg-Id
// until the stream appears (here: created while the append waits).
func TestAppendRetriesUntilStreamExists(t *testing.T) {
	ctx := ctxT(t)
	s := natstest.Start(t)
	_, js := natstest.Connect(t, s)
	a := newAppender(t, js, appendlog.AppenderOptions{RetryWait: 200 * time.Millisecond, AckTimeout: time.Second})

	done := make(chan struct{})
	var r ledger.Result
	var err error
	go func() {
		defer close(done)
		r, err = a.Append(ctx, "", tProposal("early", "alice").raw())
	}()
	time.Sleep(700 * time.Millisecond) // past nats.go's own no-responder retries
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil || r.Seq != 1 || r.Attempts < 2 {
		t.Fatalf("append while the stream was missing: %+v, %v", r, err)
	}
	t.Logf("stored after %d attempts", r.Attempts)

	// Without retries the same situation is a transient ErrPublish.
	b := newAppender(t, js, appendlog.AppenderOptions{MaxRetries: -1})
	if err := js.DeleteStream(ctx, subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	r, err = b.Append(ctx, "", tProposal("late", "alice").raw())
	if !errors.Is(err, ledger.ErrPublish) || !appendlog.IsTransient(err) || r.Attempts != 1 || !strings.Contains(err.Error(), `"late"`) {
		t.Fatalf("no stream, no retries: %+v, %v", r, err)
	}
}

func TestAppendContextCancelled(t *testing.T) {
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Append(ctx, "", tProposal("p", "alice").raw())
	if !errors.Is(err, ledger.ErrPublish) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Append(cancelled) err = %v", err)
	}
	for i, r := range a.AppendMany(ctx, "", [][]byte{tProposal("p", "a").raw(), []byte("x")}) {
		if r.Err == nil {
			t.Fatalf("AppendMany(cancelled) input %d stored", i)
		}
	}
	if n := streamMsgs(t, st); n != 0 {
		t.Fatalf("stream holds %d", n)
	}
}

func TestAppenderOptionsValidate(t *testing.T) {
	for name, o := range map[string]appendlog.AppenderOptions{
		"in flight": {MaxInFlight: -1},
		"budget":    {MaxRetries: 20, AckTimeout: 10 * time.Second},
		"limits":    {Limits: ledger.SubmitLimits{MaxBytes: 2 << 20}},
		"space":     {Space: strings.Repeat("s", 300)},
	} {
		if err := o.Validate(); !errors.Is(err, appendlog.ErrAppenderOptions) {
			t.Errorf("%s: err = %v, want ErrAppenderOptions", name, err)
		}
	}
	o := appendlog.AppenderOptions{}
	if err := o.Validate(); err != nil || o.Space != ledger.DefaultSpace || o.MaxInFlight != appendlog.DefaultMaxInFlight {
		t.Fatalf("zero options: %+v, %v", o, err)
	}
}
