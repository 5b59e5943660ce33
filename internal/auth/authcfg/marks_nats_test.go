package authcfg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// sealedRig is a real server running the generated configuration (with a
// bridge principal "recorder"), the ledger's sealing appender, its submit
// service (submit requests and gap reports), and a projector into Pebble
// folding with the same mark keys: the ledger's NATS side as `ledger
// serve` runs it.
type sealedRig struct {
	*authRig
	keys     *ledger.MarkKeys
	recorder *client
}

func newSealedRig(t *testing.T) *sealedRig {
	t.Helper()
	f := newFixture(t)
	pw, hash, err := authcfg.NewPassword(bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.doc()
	at(doc, "nats")["bridges"] = []any{map[string]any{"user": "recorder", "password": hash, "spaces": []any{"research"}}}
	cfg, err := authcfg.Load(f.write(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "nats-auth.conf")
	if err := cfg.WriteNATSConfig(conf, ""); err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = conf
	r := &sealedRig{authRig: &authRig{f: f, cfg: cfg, srv: natstest.StartWith(t, o)}}
	if r.keys, err = ledger.NewMarkKeys([]byte("0123456789abcdef0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	svcOpts, err := cfg.ServiceConnectOptions()
	if err != nil {
		t.Fatal(err)
	}
	r.svc = r.connect(t, "ledger", svcOpts...)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := appendlog.EnsureStream(ctx, r.svc.js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if r.app, err = appendlog.NewAppender(r.svc.js, appendlog.AppenderOptions{AckTimeout: 5 * time.Second, MarkKeys: r.keys}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.app.Close)
	svc, err := submit.Start(ctx, r.svc.nc, submit.Options{Appender: r.app, Logger: natstest.Logger(t),
		StreamSeq: func(ctx context.Context) (uint64, error) {
			st, err := r.svc.js.Stream(ctx, subjects.StreamName)
			if err != nil {
				return 0, err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return 0, err
			}
			return info.State.LastSeq, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	if r.store, err = projections.OpenStore(projections.StoreOptions{Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	folder := fold.NewFolder()
	folder.MarkKeys = r.keys
	p, err := projector.New(r.svc.js, r.store, projector.Options{Folder: folder, BatchSize: 10, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("projector: %v", err)
		}
		if err := r.store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	r.recorder = r.connect(t, "recorder", nats.UserInfo("recorder", pw))
	return r
}

// submitBatch sends envelopes as one NDJSON batch request on the submit
// service with mark (and senders, when given) and returns the results
// (one refusal for the whole request when refused).
func (r *sealedRig) submitBatch(t *testing.T, c *client, mark string, senders []string, envs ...[]byte) []api.AppendResult {
	t.Helper()
	msg := nats.NewMsg(subjects.Submit("research"))
	msg.Header.Set(submit.HeaderContentType, "application/x-ndjson")
	if mark != "" {
		msg.Header.Set(ledger.HeaderBridge, mark)
	}
	if senders != nil {
		msg.Header.Set(submit.HeaderSenders, submit.EncodeSenders(senders))
	}
	for _, e := range envs {
		msg.Data = append(append(msg.Data, e...), '\n')
	}
	reply, err := c.nc.RequestMsg(msg, 30*time.Second)
	if err != nil {
		t.Fatalf("%s: submit: %v", c.user, err)
	}
	var out []api.AppendResult
	for _, line := range strings.Split(strings.TrimSpace(string(reply.Data)), "\n") {
		var res api.AppendResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("reply %q: %v", reply.Data, err)
		}
		out = append(out, res)
	}
	return out
}

// reportGap sends a gap report on the gap endpoint and returns its result.
func (r *sealedRig) reportGap(t *testing.T, c *client, g ledger.Gap) api.AppendResult {
	t.Helper()
	body, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := c.nc.Request(subjects.Gap("research"), body, 30*time.Second)
	if err != nil {
		t.Fatalf("%s: gap report: %v", c.user, err)
	}
	var res api.AppendResult
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		t.Fatalf("gap reply %q: %v", reply.Data, err)
	}
	return res
}

func (r *sealedRig) bridgeRecord(t *testing.T, bridge string) api.BridgeSession {
	t.Helper()
	r.waitProjected(t)
	recs, err := r.store.BridgeSessions("research")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range recs {
		if b.Bridge == bridge {
			return b
		}
	}
	t.Fatalf("no record of bridge %q: %+v", bridge, recs)
	return api.BridgeSession{}
}

// TestForgedMarksOverNATS: the attacks on the recorders' record over
// NATS, on a real server running the generated permissions, with the
// ledger's sealing append path and a projector folding with its keys.
// An agent that publishes straight onto the stream (its own subject) a
// message with a forged Ledger-Bridge header — unsealed, with a made-up
// seal, with a seal copied from a recorded message, or a recorded message
// published again as is — moves no recorder's record: the crash gap the
// ledger records afterwards starts at the bridge's real last envelope. A
// mark dated in the future is refused by the submit service, a gap
// report past the log's end too; a restart that stores nothing new
// keeps both crash gaps. Every real gap stays on the record.
func TestForgedMarksOverNATS(t *testing.T) {
	r := newSealedRig(t)
	alice := r.as(t, "alice")
	recv := time.Now().Add(-time.Minute).UTC()
	mark := func(session string, at time.Time) string {
		return ledger.BridgeMark{Bridge: "rb", MEWSpace: "demo", Session: session, Received: at}.String()
	}

	// The bridge records three envelopes of alice's through the submit
	// service; the ledger seals their mark.
	res := r.submitBatch(t, r.recorder, mark("s1", recv), nil,
		env("r1", "alice", "mcp/proposal"), env("r2", "alice", "mcp/proposal"), env("r3", "alice", "mcp/proposal"))
	for _, x := range res {
		if x.Error != nil || x.Duplicate {
			t.Fatalf("bridge batch: %+v", res)
		}
	}
	real := r.bridgeRecord(t, "rb")
	if real.Session != "s1" || real.LastEnvelope != "r3" || real.State != api.BridgeRecording {
		t.Fatalf("after the bridge's batch: %+v", real)
	}
	// What the bridge's stored messages carry: a seal that verifies.
	st, err := r.svc.js.Stream(ctxFor(t, 10*time.Second), subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetMsg(ctxFor(t, 10*time.Second), real.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	seal := stored.Header.Get(ledger.HeaderBridgeSeal)
	if !r.keys.Verify(stored.Subject, stored.Header.Get(ledger.HeaderBridge), stored.Data, seal) {
		t.Fatalf("stored message %d: seal %q does not verify", real.LastSeq, seal)
	}

	// The forgeries, each stored (alice may publish as herself).
	later := time.Now().UTC()
	forge := func(id, m, s string) {
		t.Helper()
		msg := nats.NewMsg(evSubject("research", id, "proposal", "alice"))
		msg.Data = env(id, "alice", "mcp/proposal")
		msg.Header.Set(ledger.HeaderBridge, m)
		if s != "" {
			msg.Header.Set(ledger.HeaderBridgeSeal, s)
		}
		if _, err := alice.js.PublishMsg(ctxFor(t, 10*time.Second), msg); err != nil {
			t.Fatalf("forged publish %s: %v", id, err)
		}
	}
	forge("f1", mark("forged", later), "")                            // unsealed
	forge("f2", mark("forged", later), r.keys.SealingKeyID()+".AAAA") // a made-up seal
	forge("f3", stored.Header.Get(ledger.HeaderBridge), seal)         // a real seal, other bytes
	// A recorded message published again as is, headers and all, under
	// another Nats-Msg-Id (as after the stream's duplicate window).
	replay := nats.NewMsg(stored.Subject)
	replay.Data = stored.Data
	for k, v := range stored.Header {
		replay.Header[k] = v
	}
	replay.Header.Set(jetstream.MsgIDHeader, "replayed")
	if _, err := alice.js.PublishMsg(ctxFor(t, 10*time.Second), replay); err != nil {
		t.Fatalf("replay: %v", err)
	}
	alice.noViolation(t)
	after := r.bridgeRecord(t, "rb")
	if after.Session != real.Session || after.LastSeq != real.LastSeq || after.LastEnvelope != "r3" || after.Envelopes != real.Envelopes {
		t.Fatalf("a forged mark moved the bridge's record:\nbefore %+v\nafter  %+v", real, after)
	}
	stats, err := r.store.Stats("research")
	if err != nil {
		t.Fatal(err)
	}
	if stats.MarksIgnored != 4 {
		t.Fatalf("marks_ignored = %d, want 4 (unsealed, bad seal, copied seal, replay)", stats.MarksIgnored)
	}

	// A mark dated in the future, over the submit service: refused.
	res = r.submitBatch(t, r.recorder, mark("s1", time.Now().Add(time.Hour)), nil, env("fut", "alice", "mcp/proposal"))
	if len(res) != 1 || res[0].Error == nil || res[0].Error.Code != ledger.CodeClockAhead {
		t.Fatalf("future-dated mark: %+v", res)
	}
	// A gap report naming a last envelope past the log's end (it would
	// end the session cleanly after envelopes never stored): refused.
	g := r.reportGap(t, r.recorder, ledger.Gap{Bridge: "rb", MEWSpace: "demo", Session: "s1", LastSeq: 999999999999,
		DisconnectedAt: time.Now().UTC(), Reason: "decoy"})
	if g.Error == nil || g.Error.Code != ledger.CodeGapAhead {
		t.Fatalf("gap past the log's end: %+v", g)
	}

	// The bridge crashed: its restart records the crash gap from the
	// record's last envelope, then crashes again before storing anything,
	// and its next restart records the next one from the same envelope.
	for i, session := range []string{"s1", "s2"} {
		rec := r.bridgeRecord(t, "rb")
		g := r.reportGap(t, r.recorder, ledger.Gap{Bridge: "rb", MEWSpace: "demo", Session: session, LastSeq: rec.LastSeq,
			LastEnvelope: rec.LastEnvelope, DisconnectedAt: recv, ReconnectedAt: time.Now().UTC(),
			Reason: fmt.Sprintf("session %s ended without recording its end", session)})
		if g.Error != nil || g.Duplicate {
			t.Fatalf("crash gap %d: %+v", i+1, g)
		}
	}
	r.waitProjected(t)
	gaps, _, err := r.store.Gaps("research", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var crash []api.Gap
	for _, g := range gaps {
		if g.Bridge == "rb" {
			crash = append(crash, g)
		}
	}
	if len(crash) != 2 || crash[0].ID == crash[1].ID {
		t.Fatalf("crash gaps: %+v", gaps)
	}
	for _, g := range crash {
		if g.LastSeq != real.LastSeq || g.LastEnvelope != "r3" {
			t.Fatalf("crash gap %s starts at %d (%s), not at the bridge's real last envelope %d (r3)", g.ID, g.LastSeq, g.LastEnvelope, real.LastSeq)
		}
	}
	// Both are on the record as gaps, neither folded invalid.
	for _, g := range crash {
		h, err := r.store.History("research", g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 || h[0].Effect != api.EffectApplied {
			t.Fatalf("gap %s folded %+v", g.ID, h)
		}
	}
}

// TestHistorySendersOverNATS: a --history follower's batch names each
// envelope's sender (submit.HeaderSenders); the submit service publishes
// each under it and the ledger seals the batch's mark, so the follower's
// record moves; a senders header that does not match the batch is
// refused whole.
func TestHistorySendersOverNATS(t *testing.T) {
	r := newSealedRig(t)
	hm := ledger.BridgeMark{Bridge: "hist", MEWSpace: "demo", Session: "h1", History: true}.String()
	res := r.submitBatch(t, r.recorder, hm, []string{"alice", "mallory"},
		env("h1", "alice", "mcp/proposal"), env("h2", "alice", "mcp/proposal"))
	if len(res) != 2 || res[0].Error != nil || res[1].Error != nil {
		t.Fatalf("history batch: %+v", res)
	}
	if rec := r.bridgeRecord(t, "hist"); rec.Session != "h1" || rec.LastEnvelope != "h2" || !rec.History || rec.Envelopes != 2 {
		t.Fatalf("follower's record: %+v", rec)
	}
	h, err := r.store.History("research", "h2")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || h[0].Code != "spoofed_sender" {
		t.Fatalf("h2 (from alice, sent by mallory says the log): %+v", h)
	}
	res = r.submitBatch(t, r.recorder, hm, []string{"alice"}, env("h3", "alice", "mcp/proposal"), env("h4", "alice", "mcp/proposal"))
	if len(res) != 1 || res[0].Error == nil || res[0].Error.Code != api.CodeBadValue {
		t.Fatalf("senders not matching the batch: %+v", res)
	}
}
