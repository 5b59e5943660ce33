package authcfg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// refusalWait bounds the wait for a request the server refuses: a refused
// publish gets no answer, so the client times out. The proof of a refusal
// is the permissions violation the server sends (expectViolation), not the
// timeout.
const refusalWait = 400 * time.Millisecond

// client is one authenticated connection with its async errors.
type client struct {
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

// authRig is a real server running the generated configuration, the
// ledger's service connection, a projector into Pebble, and a connection
// per principal.
type authRig struct {
	f     *fixture
	cfg   *authcfg.Config
	srv   *natsserver.Server
	svc   *client
	app   *appendlog.Appender
	store *projections.Store
	stop  func()
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newAuthRig(t *testing.T) *authRig {
	t.Helper()
	f := newFixture(t)
	cfg := f.load(t)
	conf := filepath.Join(t.TempDir(), "nats-auth.conf")
	if err := cfg.WriteNATSConfig(conf, ""); err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = conf
	r := &authRig{f: f, cfg: cfg, srv: natstest.StartWith(t, o)}

	svcOpts, err := cfg.ServiceConnectOptions()
	if err != nil {
		t.Fatal(err)
	}
	r.svc = r.connect(t, "ledger", svcOpts...)
	ctx := ctxFor(t, 30*time.Second)
	if _, err := appendlog.EnsureStream(ctx, r.svc.js, appendlog.StreamOptions{}); err != nil {
		t.Fatalf("service EnsureStream: %v", err)
	}
	if r.app, err = appendlog.NewAppender(r.svc.js, appendlog.AppenderOptions{AckTimeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.app.Close)

	r.store, err = projections.OpenStore(projections.StoreOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projector.New(r.svc.js, r.store, projector.Options{BatchSize: 10, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("projector: %v", err)
			}
			if err := r.store.Close(); err != nil {
				t.Errorf("close store: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// connect connects as user with opts (credentials); every user but the
// service uses its own inbox prefix.
func (r *authRig) connect(t *testing.T, user string, opts ...nats.Option) *client {
	t.Helper()
	c := &client{user: user, errs: make(chan error, 64)}
	all := append([]nats.Option{nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case c.errs <- err:
		default:
		}
	})}, opts...)
	if user != "ledger" {
		all = append(all, authcfg.ClientInbox(user))
	}
	c.nc, c.js = natstest.ConnectURL(t, r.srv.ClientURL(), all...)
	return c
}

// as connects as one of the fixture's principals.
func (r *authRig) as(t *testing.T, user string) *client {
	t.Helper()
	if pw, ok := r.f.passwords[user]; ok {
		return r.connect(t, user, nats.UserInfo(user, pw))
	}
	kp, err := nkeys.FromSeed([]byte(r.f.seeds[user]))
	if err != nil {
		t.Fatal(err)
	}
	return r.connect(t, user, nats.Nkey(r.f.pubs[user], kp.Sign))
}

// expectViolation waits for the server's permissions violation for
// verb ("publish" or "subscription") on subject (a prefix when it ends in
// a dot).
func (c *client) expectViolation(t *testing.T, verb, subject string) {
	t.Helper()
	want := fmt.Sprintf("permissions violation for %s to %q", verb, subject)
	if strings.HasSuffix(subject, ".") {
		want = strings.TrimSuffix(want, `"`)
	}
	deadline := testctx.Context(t).Done()
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
				return
			}
			t.Logf("%s: other async error: %v", c.user, err)
		case <-deadline:
			t.Fatalf("%s: no %q from the server", c.user, want)
		}
	}
}

// noViolation checks that no async error arrived (after a round trip).
func (c *client) noViolation(t *testing.T) {
	t.Helper()
	if err := c.nc.FlushTimeout(time.Until(testctx.Deadline(t))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.errs:
		t.Fatalf("%s: unexpected async error: %v", c.user, err)
	default:
	}
}

// env is a MEW v0.4 envelope.
func env(id, from, kind string, corr ...string) []byte {
	m := map[string]any{"protocol": "mew/v0.4", "id": id, "from": from, "kind": kind, "payload": map[string]any{}}
	switch kind {
	case "mcp/proposal":
		m["payload"] = map[string]any{"method": "tools/call", "params": map[string]any{"name": "rm", "arguments": map[string]any{"path": "/"}}}
	case "mcp/withdraw":
		m["payload"] = map[string]any{"reason": "no_longer_needed"}
	}
	if len(corr) > 0 {
		m["correlation_id"] = corr
	}
	b, _ := json.Marshal(m)
	return b
}

func evSubject(space, key, typ, sender string) string {
	return subjects.Event{Space: space, Key: key, Type: typ, Sender: sender}.String()
}

// publish publishes to the stream and returns the ack (nil and the error
// when refused).
func (c *client) publish(t *testing.T, subject string, data []byte) (*jetstream.PubAck, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), refusalWait)
	defer cancel()
	return c.js.Publish(ctx, subject, data)
}

func (c *client) mustPublish(t *testing.T, subject string, data []byte) uint64 {
	t.Helper()
	ack, err := c.js.Publish(ctxFor(t, 10*time.Second), subject, data)
	if err != nil {
		t.Fatalf("%s: publish to %s: %v", c.user, subject, err)
	}
	return ack.Sequence
}

// refused checks that a publish was refused by the server: no PubAck, and
// a permissions violation naming the subject.
func (c *client) refused(t *testing.T, subject string, data []byte) {
	t.Helper()
	ack, err := c.publish(t, subject, data)
	if err == nil {
		t.Fatalf("%s: publish to %s was stored at seq %d", c.user, subject, ack.Sequence)
	}
	c.expectViolation(t, "publish", subject)
}

func (r *authRig) lastSeq(t *testing.T) uint64 {
	t.Helper()
	st, err := r.svc.js.Stream(ctxFor(t, 10*time.Second), subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.LastSeq
}

func (r *authRig) waitProjected(t *testing.T) {
	t.Helper()
	seq := r.lastSeq(t)
	if err := r.store.WaitApplied(ctxFor(t, 30*time.Second), seq); err != nil {
		t.Fatalf("projection at %d, stream at %d: %v", r.store.AppliedSeq(), seq, err)
	}
}

// TestAgentsConfinedToTheirSubjects runs the generated permissions on a
// real server with a real projector: an agent cannot write as another, in
// another space, through the submit service or by spoofing `from`, and
// cannot withdraw another agent's proposal by any path.
func TestAgentsConfinedToTheirSubjects(t *testing.T) {
	r := newAuthRig(t)
	alice, bob, carol := r.as(t, "alice"), r.as(t, "bob"), r.as(t, "carol")
	const space = "research"

	// Bob proposes, as himself: stored.
	pSeq := bob.mustPublish(t, evSubject(space, "p-bob", "proposal", "bob"), env("p-bob", "bob", "mcp/proposal"))
	bob.noViolation(t)

	// 1. Alice publishes on Bob's subject (from: bob): refused by the server.
	alice.refused(t, evSubject(space, "p-bob", "withdraw", "bob"), env("w-1", "bob", "mcp/withdraw", "p-bob"))
	// ... and a proposal as bob: refused too.
	alice.refused(t, evSubject(space, "p-fake", "proposal", "bob"), env("p-fake", "bob", "mcp/proposal"))

	// 2. Alice writes `from: bob` on her own subject: stored, folded invalid.
	spoofSeq := alice.mustPublish(t, evSubject(space, "p-bob", "withdraw", "alice"), env("w-2", "bob", "mcp/withdraw", "p-bob"))

	// 3. Alice withdraws Bob's proposal as herself: stored, unauthorized.
	ownSeq := alice.mustPublish(t, evSubject(space, "p-bob", "withdraw", "alice"), env("w-3", "alice", "mcp/withdraw", "p-bob"))

	// 4. Through the submit service: agents may not publish there.
	req := func(c *client, space string, data []byte) (*nats.Msg, error) {
		return c.nc.Request(subjects.Submit(space), data, refusalWait)
	}
	if m, err := req(alice, space, env("w-4", "bob", "mcp/withdraw", "p-bob")); err == nil {
		t.Fatalf("alice used the submit service: %s", m.Data)
	}
	alice.expectViolation(t, "publish", subjects.Submit(space))

	// 5. Into another space, even as herself: refused.
	alice.refused(t, evSubject("ops", "p-x", "proposal", "alice"), env("p-x", "alice", "mcp/proposal"))
	// Carol (ops) cannot publish into research.
	carol.refused(t, evSubject(space, "p-c", "proposal", "carol@ops"), env("p-c", "carol@ops", "mcp/proposal"))
	// Carol as herself in her space: stored (her id needs encoding).
	carol.mustPublish(t, evSubject("ops", "p-carol", "proposal", "carol@ops"), env("p-carol", "carol@ops", "mcp/proposal"))

	// 6. The JetStream API is closed to agents: no direct delete either.
	if err := alice.js.DeleteStream(ctxFor(t, refusalWait), subjects.StreamName); err == nil {
		t.Fatal("alice deleted the stream")
	}
	alice.expectViolation(t, "publish", "$JS.API.STREAM.DELETE.LEDGER")

	r.waitProjected(t)
	p, err := r.store.Get(space, "p-bob")
	if err != nil || p == nil {
		t.Fatalf("p-bob: %v %v", p, err)
	}
	if p.State != api.StatePending {
		t.Fatalf("p-bob is %s after alice's attempts, want pending", p.State)
	}
	if !p.HasAnomaly(api.AnomalyUnauthorizedWithdraw) {
		t.Errorf("p-bob anomalies %v, want unauthorized_withdraw", p.Anomalies)
	}
	hist, err := r.store.History(space, "p-bob")
	if err != nil {
		t.Fatal(err)
	}
	effects := map[uint64]api.HistoryEntry{}
	for _, h := range hist {
		effects[h.Seq] = h
	}
	if h := effects[pSeq]; h.Effect != api.EffectApplied {
		t.Errorf("proposal: %+v", h)
	}
	if h := effects[spoofSeq]; h.Effect != api.EffectInvalid || h.Code != fold.CodeSpoofedSender {
		t.Errorf("spoofed withdraw: effect %s code %q (%s), want invalid spoofed_sender", h.Effect, h.Code, h.Detail)
	}
	if h := effects[ownSeq]; h.Effect != api.EffectUnauthorized {
		t.Errorf("alice's own withdraw: effect %s, want unauthorized", h.Effect)
	}
	if len(hist) != 3 {
		t.Errorf("p-bob history has %d events, want 3 (refused publishes never reach the log): %+v", len(hist), hist)
	}
	if c, err := r.store.Get("ops", "p-carol"); err != nil || c == nil || c.Proposer != "carol@ops" {
		t.Errorf("carol's proposal: %+v %v", c, err)
	}

	// Bob may withdraw his own proposal.
	bob.mustPublish(t, evSubject(space, "p-bob", "withdraw", "bob"), env("w-5", "bob", "mcp/withdraw", "p-bob"))
	r.waitProjected(t)
	if p, _ := r.store.Get(space, "p-bob"); p == nil || p.State != api.StateWithdrawn || p.DecidedBy != "bob" {
		t.Fatalf("bob's own withdrawal: %+v", p)
	}
	for _, c := range []*client{alice, bob, carol} {
		c.noViolation(t)
	}
}

// TestSubscriptionsConfined: agents read their own inbox and the spaces
// listed in `read`, nothing else; an inbox cannot be snooped.
func TestSubscriptionsConfined(t *testing.T) {
	r := newAuthRig(t)
	alice, bob := r.as(t, "alice"), r.as(t, "bob")

	for _, subj := range []string{subjects.AllInboxes, subjects.InboxFilter("alice"), subjects.SpaceFilter("research"), subjects.SubmitWildcard, ">"} {
		if _, err := bob.nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		bob.expectViolation(t, "subscription", subj)
	}
	if _, err := alice.nc.SubscribeSync(subjects.SpaceFilter("ops")); err != nil {
		t.Fatal(err)
	}
	alice.expectViolation(t, "subscription", subjects.SpaceFilter("ops"))

	// Alice watches research live, as `read` allows: she sees bob's event.
	sub, err := alice.nc.SubscribeSync(subjects.SpaceFilter("research"))
	if err != nil {
		t.Fatal(err)
	}
	alice.noViolation(t)
	subj := evSubject("research", "p-1", "proposal", "bob")
	bob.mustPublish(t, subj, env("p-1", "bob", "mcp/proposal"))
	m, err := sub.NextMsg(time.Until(testctx.Deadline(t)))
	if err != nil || m.Subject != subj {
		t.Fatalf("alice's live read: %v %v", m, err)
	}
	// Unread messages would hold up the connection's drain at cleanup.
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	// A connection without the per-user inbox prefix cannot get its acks.
	kp, _ := nkeys.FromSeed([]byte(r.f.seeds["bob"]))
	plain := &client{user: "bob-default-inbox", errs: make(chan error, 64)}
	plain.nc, plain.js = natstest.ConnectURL(t, r.srv.ClientURL(), nats.Nkey(r.f.pubs["bob"], kp.Sign),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case plain.errs <- err:
			default:
			}
		}))
	if _, err := plain.publish(t, evSubject("research", "p-2", "proposal", "bob"), env("p-2", "bob", "mcp/proposal")); err == nil {
		t.Fatal("ack received on the default inbox")
	}
	plain.expectViolation(t, "subscription", "_INBOX.")
	plain.nc.Close()

	// Wrong credentials: no connection at all.
	if nc, err := nats.Connect(r.srv.ClientURL(), nats.UserInfo("alice", "wrong")); err == nil {
		nc.Close()
		t.Fatal("connected with a wrong password")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Logf("wrong password: %v", err)
	}
	if nc, err := nats.Connect(r.srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
}

// TestStreamProtectedServiceWorks: nobody can delete, purge or update
// LEDGER except the service's update; the service appends, projects,
// manages consumers and serves submit requests from a gateway; the auditor
// reads the log but cannot touch the projector's consumer.
func TestStreamProtectedServiceWorks(t *testing.T) {
	r := newAuthRig(t)
	alice, auditor, gateway := r.as(t, "alice"), r.as(t, "audit"), r.as(t, "gateway")
	ctx := ctxFor(t, 60*time.Second)

	// The service appends through the Appender.
	for i := range 3 {
		if _, err := r.app.Append(ctx, "research", env(fmt.Sprintf("s-%d", i), "alice", "mcp/proposal")); err != nil {
			t.Fatalf("service append: %v", err)
		}
	}
	alice.mustPublish(t, evSubject("research", "a-1", "proposal", "alice"), env("a-1", "alice", "mcp/proposal"))
	before := r.lastSeq(t)

	// Destructive requests: agents, auditors and the service are all refused.
	stInfo := func(c *client) jetstream.Stream {
		st, err := c.js.Stream(ctx, subjects.StreamName)
		if err != nil {
			t.Fatalf("%s stream info: %v", c.user, err)
		}
		return st
	}
	for _, c := range []*client{alice, auditor, r.svc} {
		if err := c.js.DeleteStream(ctxFor(t, refusalWait), subjects.StreamName); err == nil {
			t.Fatalf("%s deleted the stream", c.user)
		}
		c.expectViolation(t, "publish", subjects.JSStreamAPI("DELETE"))
		if m, err := c.nc.Request(subjects.JSStreamAPI("PURGE"), []byte("{}"), refusalWait); err == nil {
			t.Fatalf("%s: purge answered: %s", c.user, m.Data)
		}
		c.expectViolation(t, "publish", subjects.JSStreamAPI("PURGE"))
	}
	// Message delete by the service: refused by permissions (and by deny_delete).
	svcStream := stInfo(r.svc)
	if err := svcStream.DeleteMsg(ctxFor(t, refusalWait), 1); err == nil {
		t.Fatal("service deleted a message")
	}
	r.svc.expectViolation(t, "publish", subjects.JSStreamAPI("MSG.DELETE"))

	// Update (e.g. a max age that would age history out): refused to
	// agents and auditors.
	cfg := svcStream.CachedInfo().Config
	cfg.MaxAge = time.Hour
	for _, c := range []*client{alice, auditor} {
		if _, err := c.js.UpdateStream(ctxFor(t, refusalWait), cfg); err == nil {
			t.Fatalf("%s updated the stream", c.user)
		}
		c.expectViolation(t, "publish", subjects.JSStreamAPI("UPDATE"))
	}
	// The service still manages its stream: EnsureStream updates a setting.
	st, err := appendlog.EnsureStream(ctx, r.svc.js, appendlog.StreamOptions{DuplicateWindow: 3 * time.Minute})
	if err != nil || st.CachedInfo().Config.Duplicates != 3*time.Minute {
		t.Fatalf("service EnsureStream update: %v", err)
	}

	// The gateway submits through the submit service (a micro service run
	// by the service user); the agent cannot.
	svc, err := micro.AddService(r.svc.nc, micro.Config{Name: "ledger-submit-test", Version: "0.0.1",
		Endpoint: &micro.EndpointConfig{Subject: subjects.SubmitWildcard, Handler: micro.HandlerFunc(func(req micro.Request) {
			space, err := subjects.ParseSubmit(req.Subject())
			if err != nil {
				_ = req.Error("400", err.Error(), nil)
				return
			}
			res, err := r.app.Append(context.Background(), space, req.Data())
			if err != nil {
				_ = req.Error("400", err.Error(), nil)
				return
			}
			_ = req.RespondJSON(map[string]any{"seq": res.Seq, "duplicate": res.Duplicate})
		})}})
	if err != nil {
		t.Fatalf("service user cannot run the submit service: %v", err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	r.svc.noViolation(t) // flushes: the endpoint is subscribed before the gateway asks
	resp, err := gateway.nc.Request(subjects.Submit("ops"), env("g-1", "dave", "mcp/proposal"), 10*time.Second)
	if err != nil {
		t.Fatalf("gateway submit: %v", err)
	}
	var sr struct{ Seq uint64 }
	if err := json.Unmarshal(resp.Data, &sr); err != nil || sr.Seq == 0 || resp.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("gateway submit reply: %s %v", resp.Data, resp.Header)
	}
	if _, err := gateway.nc.Request(subjects.Submit("elsewhere"), env("g-2", "dave", "mcp/proposal"), refusalWait); err == nil {
		t.Fatal("gateway submitted into a space it does not serve")
	}
	gateway.expectViolation(t, "publish", subjects.Submit("elsewhere"))
	gateway.refused(t, evSubject("ops", "g-3", "proposal", "gateway"), env("g-3", "gateway", "mcp/proposal"))

	// The auditor reads the log: message get and an ordered consumer.
	ast := stInfo(auditor)
	if m, err := ast.GetMsg(ctx, 1); err != nil || m.Sequence != 1 {
		t.Fatalf("auditor GetMsg: %v", err)
	}
	oc, err := ast.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("auditor ordered consumer: %v", err)
	}
	batch, err := oc.Fetch(int(before), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != int(before) {
		t.Fatalf("auditor read %d messages, want %d (%v)", n, before, batch.Error())
	}
	// ... but cannot take over or drain the projector's durable consumer.
	if _, err := ast.CreateOrUpdateConsumer(ctxFor(t, refusalWait), jetstream.ConsumerConfig{Durable: authcfg.DefaultDurable, FilterSubject: subjects.SpaceFilter("ops")}); err == nil {
		t.Fatal("auditor reconfigured the projector's consumer")
	}
	auditor.expectViolation(t, "publish", subjects.JSConsumerAPI("CREATE", authcfg.DefaultDurable)+".")
	if _, err := ast.CreateOrUpdateConsumer(ctxFor(t, refusalWait), jetstream.ConsumerConfig{Durable: authcfg.DefaultDurable, AckPolicy: jetstream.AckNonePolicy}); err == nil {
		t.Fatal("auditor reconfigured the projector's consumer")
	}
	auditor.expectViolation(t, "publish", subjects.JSConsumerAPI("CREATE", authcfg.DefaultDurable))
	cons, err := ast.Consumer(ctx, authcfg.DefaultDurable) // info is allowed
	if err != nil {
		t.Fatalf("auditor consumer info: %v", err)
	}
	if b, err := cons.Fetch(1, jetstream.FetchMaxWait(refusalWait)); err == nil {
		for m := range b.Messages() {
			t.Fatalf("auditor pulled %s from the projector's consumer", m.Subject())
		}
	}
	auditor.expectViolation(t, "publish", subjects.JSConsumerAPI("MSG.NEXT", authcfg.DefaultDurable))
	if err := ast.DeleteConsumer(ctxFor(t, refusalWait), authcfg.DefaultDurable); err == nil {
		t.Fatal("auditor deleted the projector's consumer")
	}
	auditor.expectViolation(t, "publish", subjects.JSConsumerAPI("DELETE", authcfg.DefaultDurable))
	auditor.refused(t, evSubject("research", "x", "proposal", "audit"), env("x", "audit", "mcp/proposal"))

	// Nothing was lost and the projector kept up with everything.
	after := r.lastSeq(t)
	if after != before+1 {
		t.Fatalf("stream at %d, want %d (before) + 1 (gateway)", after, before)
	}
	r.waitProjected(t)
	if p, err := r.store.Get("ops", "g-1"); err != nil || p == nil || p.Proposer != "dave" {
		t.Fatalf("gateway's envelope: %+v %v", p, err)
	}
}

// The wiring of an embedded ledger: the generated file as the embedded
// server's ConfigFile (including an operator's own file), and the ledger's
// in-process connection with the service credentials.
func TestEmbeddedWiring(t *testing.T) {
	f := newFixture(t)
	d := f.doc()
	at(d, "nats.service")["durables"] = []any{"projector", "projector-a"}
	cfg, err := authcfg.Load(f.write(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.DurableListed("projector-a") || cfg.DurableListed("projector-b") {
		t.Fatal("DurableListed")
	}
	dir := t.TempDir()
	operator := filepath.Join(t.TempDir(), "operator.conf")
	if err := os.WriteFile(operator, []byte("max_connections: 77\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats-auth.conf")
	if err := cfg.WriteNATSConfig(conf, operator); err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = conf
	srv := natstest.StartWith(t, o)
	if v, err := srv.NatsServer().Varz(nil); err != nil || v.MaxConn != 77 {
		t.Errorf("operator's file not included: %v %v", v.MaxConn, err)
	}
	svcOpts, err := cfg.ServiceConnectOptions()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("", append(svcOpts, nats.InProcessServer(srv.NatsServer()))...)
	if err != nil {
		t.Fatalf("in-process service connection: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendlog.EnsureStream(ctxFor(t, 10*time.Second), js, appendlog.StreamOptions{}); err != nil {
		t.Fatalf("EnsureStream in process: %v", err)
	}
}
