package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// newFastRig is newRig on a server that fsyncs in the background rather
// than before every ack: these tests are about the fold, not durability,
// and an fsync per message costs ~8 ms on a small CI disk.
func newFastRig(t *testing.T) *rig {
	t.Helper()
	o := natstest.Options(t)
	o.SyncInterval = time.Minute
	srv := natstest.StartWith(t, o)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(testctx.Whole(t))
	defer cancel()
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	app, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	return &rig{js: js, app: app}
}

// victim is a valid proposal that hostile messages are aimed at.
type victim struct{ id, proposer string }

// The valid proposals of the hostile run, with ids that need encoded
// subject tokens, and what happens to them.
var victims = []victim{{"v.1", "alice"}, {"v 2", "bob"}, {"v*3", "carol"}, {"v>4", "dave"}, {"~v5", "erin"}, {"victim-6", "frank"}}

func victimTraffic() [][]byte {
	env := func(id, from, kind string, corr []string, payload string) []byte {
		m := map[string]any{"protocol": "mew/v0.4", "id": id, "from": from, "kind": kind, "payload": json.RawMessage(payload)}
		if corr != nil {
			m["correlation_id"] = corr
		}
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		return b
	}
	var out [][]byte
	for _, v := range victims {
		out = append(out, env(v.id, v.proposer, "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"rm","arguments":{"path":"/"}}}`))
	}
	return append(out,
		env("v.1-withdraw", "alice", "mcp/withdraw", []string{"v.1"}, `{"reason":"no_longer_needed"}`),
		env("v 2-reject", "fs-agent", "mcp/reject", []string{"v 2"}, `{"reason":"unsafe"}`),
		env("v 2-why", "fs-agent", "chat", []string{"v 2-reject"}, `{"text":"outside the sandbox"}`),
		env("v*3-fulfil", "human", "mcp/request", []string{"v*3"}, `{"method":"tools/call","params":{"name":"rm","arguments":{"path":"/"}}}`),
		env("v*3-response", "fs-agent", "mcp/response", []string{"v*3-fulfil"}, `{"result":{"ok":true}}`),
		env("~v5-foreign-withdraw", "mallory", "mcp/withdraw", []string{"~v5"}, `{"reason":"other"}`),
		env("victim-6-reject-1", "fs-agent", "mcp/reject", []string{"victim-6"}, `{"reason":"busy"}`),
		env("victim-6-reject-2", "policy-agent", "mcp/reject", []string{"victim-6"}, `{"reason":"a-code-nobody-knows"}`),
	)
}

// hostileMsg is one raw publish of a corpus case.
type hostileMsg struct {
	c       badinput.Case
	shape   string
	subject string
	seq     uint64
}

// garbageSubjects are five-token subjects (the stream binds ledger.*.*.*.*)
// that do not parse, or parse to odd spaces, keys, types and senders.
func garbageSubjects(v victim) []string {
	return []string{
		"ledger.default.~!!!.proposal.x",                             // not base64
		"ledger.default.~YQ.proposal.a",                              // non-canonical encoding of "a"
		"ledger.~.~.~.~",                                             // empty values, type "~"
		"ledger.~.~.withdraw.~",                                      // parses: empty space, key and sender
		"ledger.default.victim-6.NOT_A_TYPE.x",                       // unknown type token
		"ledger.default.\xff\xfe.proposal.x",                         // key token not UTF-8
		"ledger.default.ü.reject.x",                                  // unencoded unicode
		"ledger.default." + strings.Repeat("k", 200) + ".proposal.x", // plain token over 128
		"ledger.default.-.proposal._",
		subjects.Event{Space: "DEFAULT", Key: v.id, Type: "withdraw", Sender: v.proposer}.String(),
		subjects.Event{Space: ledger.DefaultSpace, Key: v.id, Type: "expire", Sender: ledger.LedgerSender}.String(),
	}
}

// hostilePlan builds the raw publishes of every case: aimed at a victim as
// its proposer's withdrawal (the most dangerous valid subject), under its
// own subject (or encoded tokens naming a victim when it does not decode),
// and under a garbage subject.
func hostilePlan(t *testing.T, cases []badinput.Case) []hostileMsg {
	t.Helper()
	var plan []hostileMsg
	for i, c := range cases {
		if len(c.Data) > natsserver.DefaultMaxPayload-4096 {
			t.Logf("%s: %d bytes, over the server's max_payload: no client can publish it (covered by the submit paths)", c.Name, len(c.Data))
			continue
		}
		v := victims[i%len(victims)]
		plan = append(plan, hostileMsg{c: c, shape: "victim", subject: subjects.Event{Space: ledger.DefaultSpace, Key: v.id, Type: "withdraw", Sender: v.proposer}.String()})
		own := subjects.Event{Space: ledger.DefaultSpace, Key: v.id, Type: "reject", Sender: "fs agent.*"}.String()
		if d, err := ledger.Decode(c.Data, ledger.DecodeOptions{Now: time.Now()}); err == nil {
			// Under its own subject a decodable case folds as any event
			// would (the 10,000-target withdrawal: 10,000 orphans, its
			// bytes parked once, linear cost — TestFoldManyTargetsLinear).
			own = subjects.Event{Space: ledger.DefaultSpace, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		plan = append(plan, hostileMsg{c: c, shape: "own", subject: own})
		g := garbageSubjects(v)
		plan = append(plan, hostileMsg{c: c, shape: "garbage", subject: g[i%len(g)]})
	}
	return plan
}

// publishInterleaved publishes the valid envelopes (through Prepare, with
// their Nats-Msg-Id) and the hostile ones (raw, no validation) on one
// connection in the given order, and returns the highest sequence. The
// hostile messages get their sequences set.
func publishInterleaved(t *testing.T, r *rig, valid [][]byte, plan []hostileMsg) uint64 {
	t.Helper()
	type pending struct {
		fut jetstream.PubAckFuture
		h   *hostileMsg
	}
	var futs []pending
	send := func(m *nats.Msg, h *hostileMsg, opts ...jetstream.PublishOpt) {
		f, err := r.js.PublishMsgAsync(m, opts...)
		if err != nil {
			t.Fatalf("publish %q: %v", m.Subject, err)
		}
		futs = append(futs, pending{f, h})
	}
	per := len(plan)/max(len(valid), 1) + 1
	next := 0
	for _, raw := range valid {
		p, err := r.app.Prepare("", raw)
		if err != nil {
			t.Fatalf("valid envelope refused: %v: %s", err, raw)
		}
		send(&nats.Msg{Subject: p.Subject, Data: p.Raw}, nil, jetstream.WithMsgID(p.MsgID))
		for k := 0; k < per && next < len(plan); k++ {
			h := &plan[next]
			send(&nats.Msg{Subject: h.subject, Data: h.c.Data}, h)
			next++
		}
	}
	for ; next < len(plan); next++ {
		h := &plan[next]
		send(&nats.Msg{Subject: h.subject, Data: h.c.Data}, h)
	}
	var last uint64
	for _, p := range futs {
		select {
		case ack := <-p.fut.Ok():
			last = max(last, ack.Sequence)
			if p.h != nil {
				p.h.seq = ack.Sequence
			}
		case err := <-p.fut.Err():
			t.Fatalf("publish %q: %v", p.fut.Msg().Subject, err)
		case <-time.After(60 * time.Second):
			t.Fatal("no ack in 60s")
		}
	}
	return last
}

// essence is a proposal without what depends on where its events sit in
// the log (sequences, times) or on events filed under it that did not
// apply (events, updated_*).
func essence(p *api.Proposal) *api.Proposal {
	c := p.Clone()
	c.CreatedSeq, c.UpdatedSeq, c.DecidedSeq, c.Events = 0, 0, 0, 0
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = time.Time{}, time.Time{}, nil
	for i := range c.Rejections {
		c.Rejections[i].Seq = 0
	}
	for i := range c.Fulfillments {
		c.Fulfillments[i].Seq = 0
		for j := range c.Fulfillments[i].Responses {
			c.Fulfillments[i].Responses[j].Seq = 0
		}
	}
	for i := range c.Approvals {
		c.Approvals[i].Seq = 0
	}
	if c.Withdrawal != nil {
		c.Withdrawal.Seq = 0
	}
	return c
}

type histLine struct {
	ID, Type, From string
	Effect         api.Effect
	Code           string
	Anomalies      []string
	Outcome        string
}

// validHistory is the history of key restricted to the events of ids.
func validHistory(t *testing.T, s *projections.Store, key string, ids map[string]bool) []histLine {
	t.Helper()
	h, err := s.History(ledger.DefaultSpace, key)
	if errors.Is(err, projections.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []histLine
	for _, e := range h {
		if ids[e.ID] && e.Effect != api.EffectInvalid {
			out = append(out, histLine{e.ID, e.Type, e.From, e.Effect, e.Code, e.Anomalies, e.Outcome})
		}
	}
	return out
}

// TestHostileRawPublishes publishes every corpus case raw onto LEDGER
// subjects (no validation) — as a victim's proposer withdrawing it, under
// its own subject, and under garbage subjects — interleaved with valid
// traffic, with a live projector. The projector never stops; every hostile
// message that does not decode, or names a subject it does not match, is
// filed as invalid (with the decode's refusal code, or bad_subject) or
// ignored; and the valid proposals end exactly as in a control run of the
// same valid traffic alone (state, decisions, rejections, fulfilments,
// anomalies, the effects of their own events). The live projection also
// equals a rebuild of the hostile log.
func TestHostileRawPublishes(t *testing.T) {
	cases, err := badinput.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	g := workload.New(workload.Options{Seed: 21, Disorder: 10, Duplicates: 3, Foreign: 20, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	valid := append(victimTraffic(), g.Batch(600)...)
	validIDs := map[string]bool{}
	keys := map[string]bool{}
	for _, raw := range valid {
		d, err := ledger.Decode(raw, ledger.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		validIDs[d.Env.ID] = true
		keys[d.Key] = true
	}
	for _, v := range victims {
		keys[v.id] = true
	}
	for _, id := range g.Proposals() {
		keys[id] = true
	}

	// Control: the valid traffic alone.
	ctl := newFastRig(t)
	ctlStore := openStore(t, t.TempDir())
	runProjector(t, ctl.js, ctlStore, projector.Options{Durable: "control"})
	waitApplied(t, ctlStore, ctl.appendAll(t, valid))

	// Hostile run: the same valid traffic with the corpus interleaved.
	r := newFastRig(t)
	live := openStore(t, t.TempDir())
	p, err := projector.New(r.js, live, projector.Options{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	plan := hostilePlan(t, cases)
	last := publishInterleaved(t, r, valid, plan)
	waitCtx, waitCancel := context.WithCancel(testctx.Whole(t))
	defer waitCancel()
	go func() {
		// A projector that stops would leave WaitApplied waiting: fail fast.
		select {
		case err := <-runErr:
			runErr <- err
			waitCancel()
		case <-waitCtx.Done():
		}
	}()
	if err := live.WaitApplied(waitCtx, last); err != nil {
		select {
		case err := <-runErr:
			t.Fatalf("projector stopped at seq %d: %v", live.AppliedSeq(), err)
		default:
		}
		t.Fatalf("projection did not reach seq %d (at %d): %v", last, live.AppliedSeq(), err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("projector: %v", err)
	}

	// Every hostile message is filed where its subject says, as invalid or
	// ignored (or as a duplicate of an ignored one with the same id).
	byEffect := map[api.Effect]int{}
	histories := map[string][]api.HistoryEntry{}
	for _, h := range plan {
		d, derr := ledger.Decode(h.c.Data, ledger.DecodeOptions{Now: time.Now()})
		if h.shape == "own" && derr == nil {
			continue // a decodable envelope under its own subject folds as any event would
		}
		space, key := subjects.FiledUnder(h.subject)
		hk := space + "\x00" + key
		hist, ok := histories[hk]
		if !ok {
			var err error
			if hist, err = live.History(space, key); err != nil {
				t.Errorf("%s (%s, %q): history of %q in space %q: %v", h.c.Name, h.shape, h.subject, key, space, err)
			}
			histories[hk] = hist
		}
		var e *api.HistoryEntry
		for i := range hist {
			if hist[i].Seq == h.seq {
				e = &hist[i]
			}
		}
		if e == nil {
			t.Errorf("%s (%s, %q): no history entry for seq %d under %q", h.c.Name, h.shape, h.subject, h.seq, key)
			continue
		}
		byEffect[e.Effect]++
		subj, perr := subjects.ParseEvent(h.subject)
		switch {
		case perr != nil:
			if e.Effect != api.EffectInvalid || e.Code != fold.CodeBadSubject {
				t.Errorf("%s under %q: %s/%s, want invalid/%s", h.c.Name, h.subject, e.Effect, e.Code, fold.CodeBadSubject)
			}
		case derr != nil:
			want, _ := ledger.AsRefusal(derr)
			if e.Effect != api.EffectInvalid || e.Code != want.Code {
				t.Errorf("%s (%s): %s/%s, want invalid/%s", h.c.Name, h.shape, e.Effect, e.Code, want.Code)
			}
		case d.Type == ledger.TypeIgnored && subj.Sender != d.Env.From:
			// The sender check holds for every kind: not ignored, spoofed.
			if e.Effect != api.EffectInvalid || e.Code != fold.CodeSpoofedSender {
				t.Errorf("%s (%s, %q): %s/%s, want invalid/%s", h.c.Name, h.shape, h.subject, e.Effect, e.Code, fold.CodeSpoofedSender)
			}
		case d.Type == ledger.TypeIgnored:
			if e.Effect != api.EffectIgnored && e.Effect != api.EffectDuplicate {
				t.Errorf("%s (%s): %s, want ignored", h.c.Name, h.shape, e.Effect)
			}
		default:
			if e.Effect != api.EffectInvalid {
				t.Errorf("%s (%s, %q): %s (%s), want invalid", h.c.Name, h.shape, h.subject, e.Effect, e.Detail)
			}
		}
	}

	// The valid proposals are unchanged.
	compared := 0
	for key := range keys {
		want, errW := ctlStore.Get(ledger.DefaultSpace, key)
		got, errG := live.Get(ledger.DefaultSpace, key)
		if errors.Is(errW, projections.ErrNotFound) && errors.Is(errG, projections.ErrNotFound) {
			continue
		}
		if errW != nil || errG != nil {
			t.Errorf("%q: control %v, hostile %v", key, errW, errG)
			continue
		}
		compared++
		if a, b := essence(want), essence(got); !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Errorf("%q changed by hostile input:\ncontrol %s\nhostile %s", key, ja, jb)
		}
		if a, b := validHistory(t, ctlStore, key, validIDs), validHistory(t, live, key, validIDs); !reflect.DeepEqual(a, b) {
			t.Errorf("%q: history of its own events differs:\ncontrol %+v\nhostile %+v", key, a, b)
		}
		for _, s := range []*projections.Store{ctlStore, live} {
			p, _ := s.Get(ledger.DefaultSpace, key)
			h, _ := s.History(ledger.DefaultSpace, key)
			if p.Events != len(h) {
				t.Errorf("%q: events %d but %d history entries", key, p.Events, len(h))
			}
		}
	}
	if compared < 300 {
		t.Fatalf("compared only %d proposals", compared)
	}

	// Every stored message is counted once, whatever space it landed in.
	spaces, err := live.Spaces()
	if err != nil {
		t.Fatal(err)
	}
	var events int64
	for _, sp := range spaces {
		st, err := live.Stats(sp)
		if err != nil {
			t.Fatal(err)
		}
		events += st.Events
	}
	if events != int64(last) {
		t.Errorf("stats count %d events in spaces %q; the stream holds %d", events, spaces, last)
	}

	// Deterministic with hostile input too: a rebuild is the same bytes.
	if d, err := projections.Compare(live, rebuildInto(t, r.js)); err != nil || d != nil {
		t.Fatalf("live projection differs from a rebuild: %v %v", err, d)
	}
	t.Logf("%d valid events, %d hostile publishes (%v), %d valid proposals unchanged; log %d messages",
		len(valid), len(plan), byEffect, compared, last)
}
