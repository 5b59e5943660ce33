package appendlog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// ctxT returns a context bounded by the test's deadline (or a minute).
func ctxT(t testing.TB) context.Context {
	t.Helper()
	d := time.Now().Add(time.Minute)
	if tt, ok := t.(*testing.T); ok {
		if dl, ok := tt.Deadline(); ok && dl.Before(d) {
			d = dl
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// ledgerJS starts a server, connects, and ensures the LEDGER stream.
func ledgerJS(t testing.TB) (*natsserver.Server, *nats.Conn, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	return ledgerJSWith(t, natstest.Options(t))
}

// ledgerJSWith is ledgerJS on a server started with o.
func ledgerJSWith(t testing.TB, o natsserver.Options) (*natsserver.Server, *nats.Conn, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	s := natstest.StartWith(t, o)
	nc, js := natstest.Connect(t, s)
	st, err := appendlog.EnsureStream(ctxT(t), js, appendlog.StreamOptions{})
	if err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	return s, nc, js, st
}

func TestMaxSizesAgree(t *testing.T) {
	if appendlog.DefaultMaxMsgSize != natsserver.DefaultMaxPayload {
		t.Fatalf("appendlog.DefaultMaxMsgSize %d != natsserver.DefaultMaxPayload %d", appendlog.DefaultMaxMsgSize, natsserver.DefaultMaxPayload)
	}
	if appendlog.DefaultMaxMsgSize <= ledger.MaxEnvelopeBytes {
		t.Fatal("no header headroom above the envelope limit")
	}
}

func TestEnsureStreamCreatesAndRechecks(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	c := st.CachedInfo().Config
	if !slices.Equal(c.Subjects, []string{subjects.StreamSubjects}) || c.Storage != jetstream.FileStorage ||
		!c.DenyDelete || !c.DenyPurge || c.Duplicates != appendlog.DefaultDuplicateWindow || c.MaxAge != 0 ||
		c.Replicas != 1 || c.Discard != jetstream.DiscardNew || c.MaxMsgSize != appendlog.DefaultMaxMsgSize ||
		c.AllowDirect || c.AllowRollup || c.AllowMsgTTL || c.MaxMsgs != -1 || c.MaxBytes != -1 {
		t.Fatalf("created config = %+v", c)
	}

	// Again: nothing to do, same stream.
	st2, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{})
	if err != nil {
		t.Fatalf("EnsureStream again: %v", err)
	}
	if !st2.CachedInfo().Created.Equal(st.CachedInfo().Created) {
		t.Fatal("EnsureStream re-created the stream")
	}

	// Someone changed managed settings: EnsureStream brings them back.
	c.Duplicates = time.Minute
	c.MaxMsgs = 1000
	c.Discard = jetstream.DiscardOld
	if _, err := js.UpdateStream(ctx, c); err != nil {
		t.Fatal(err)
	}
	st3, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{DuplicateWindow: 5 * time.Minute})
	if err != nil {
		t.Fatalf("EnsureStream after drift: %v", err)
	}
	c3 := st3.CachedInfo().Config
	if c3.Duplicates != 5*time.Minute || c3.MaxMsgs != -1 || c3.Discard != jetstream.DiscardNew {
		t.Fatalf("drift not repaired: dup=%v maxmsgs=%d discard=%v", c3.Duplicates, c3.MaxMsgs, c3.Discard)
	}

	// Replicas 3 on a single server: a clear error, stream untouched.
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{Replicas: 3}); !errors.Is(err, appendlog.ErrStreamConfig) {
		t.Fatalf("R3 on one node: err = %v, want ErrStreamConfig", err)
	}
}

func TestEnsureStreamRefusesIncompatible(t *testing.T) {
	base := (&appendlog.StreamOptions{Replicas: 1, DuplicateWindow: time.Minute, MaxMsgSize: appendlog.DefaultMaxMsgSize}).StreamConfig()
	cases := map[string]func(c *jetstream.StreamConfig){
		"subjects":     func(c *jetstream.StreamConfig) { c.Subjects = []string{"ledger.>"} },
		"memory":       func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage },
		"deny delete":  func(c *jetstream.StreamConfig) { c.DenyDelete = false },
		"deny purge":   func(c *jetstream.StreamConfig) { c.DenyPurge = false },
		"message ttls": func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true },
		"interest":     func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			_, js := natstest.Connect(t, natstest.Start(t))
			c := base
			c.Subjects = slices.Clone(base.Subjects)
			mutate(&c)
			if _, err := js.CreateStream(ctx, c); err != nil {
				t.Fatalf("create: %v", err)
			}
			_, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{})
			if !errors.Is(err, appendlog.ErrStreamConfig) {
				t.Fatalf("err = %v, want ErrStreamConfig", err)
			}
			t.Logf("%v", err)
		})
	}
}

func TestStreamOptionsValidate(t *testing.T) {
	for name, o := range map[string]appendlog.StreamOptions{
		"replicas":    {Replicas: 7},
		"msg size":    {MaxMsgSize: 1000},
		"age < dup":   {MaxAge: time.Minute},
		"neg dup win": {DuplicateWindow: -time.Second},
	} {
		if err := o.Validate(); !errors.Is(err, appendlog.ErrStreamConfig) {
			t.Errorf("%s: err = %v, want ErrStreamConfig", name, err)
		}
	}
}

// The log is append-only: message deletes, purges and turning the deny
// flags off are refused by the server. Deleting the whole stream is NOT:
// JetStream's deny flags do not cover it, so the test records that it
// succeeds; only NATS permissions stop it (TestPermissionsProtectStream).
func TestStreamImmutable(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})
	for i := range 3 {
		if _, err := a.Append(ctx, "", tProposal(idf("p", i), "alice").raw()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Purge(ctx); err == nil {
		t.Error("Purge succeeded")
	} else {
		t.Logf("purge: %v", err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subjects.Filter("default", "", "", ""))); err == nil {
		t.Error("Purge by subject succeeded")
	}
	if err := st.DeleteMsg(ctx, 2); err == nil {
		t.Error("DeleteMsg succeeded")
	} else {
		t.Logf("delete msg: %v", err)
	}
	if err := st.SecureDeleteMsg(ctx, 2); err == nil {
		t.Error("SecureDeleteMsg succeeded")
	}
	c := st.CachedInfo().Config
	c.DenyDelete, c.DenyPurge = false, false
	if _, err := js.UpdateStream(ctx, c); err == nil {
		t.Error("UpdateStream turning deny_delete/deny_purge off succeeded")
	} else {
		t.Logf("update deny flags off: %v", err)
	}
	// A publish asking for a per-message TTL must not be stored.
	if _, err := js.Publish(ctx, "ledger.default.x.proposal.alice", []byte("{}"), jetstream.WithMsgTTL(time.Second)); err == nil {
		t.Error("publish with a message TTL was stored")
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 || info.State.FirstSeq != 1 {
		t.Fatalf("state after refused deletes: %+v", info.State)
	}

	// Whole-stream delete: allowed by JetStream whatever the deny flags.
	err = js.DeleteStream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatalf("DeleteStream was refused (%v): JetStream changed; update the docs of EnsureStream", err)
	}
	if _, err := js.Stream(ctx, subjects.StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream still there after delete: %v", err)
	}
	t.Log("DeleteStream on LEDGER succeeds despite deny_delete/deny_purge: only permissions protect the stream")
}

// With authentication, permissions keep agents (and every non-ops user)
// away from the JetStream API subjects that destroy history.
func TestPermissionsProtectStream(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "auth.conf")
	err := os.WriteFile(conf, []byte(`
authorization {
  users: [
    # the ledger service and ops: everything
    { user: ledger, password: ledger-secret }
    # an agent: publish only as itself in its space, read its inbox
    { user: alice, password: alice-secret, permissions: {
        publish: { allow: ["ledger.default.*.*.alice"] }
        subscribe: { allow: ["_INBOX.>"] }
    } }
    # an auditor-like user that may use the JetStream API but not destroy
    { user: auditor, password: auditor-secret, permissions: {
        publish: { allow: [">"], deny: [
          "$JS.API.STREAM.DELETE.LEDGER", "$JS.API.STREAM.PURGE.LEDGER",
          "$JS.API.STREAM.UPDATE.LEDGER", "$JS.API.STREAM.MSG.DELETE.LEDGER",
          "ledger.*.*.*.*" ] }
    } }
  ]
}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = conf
	s := natstest.StartWith(t, o)
	ctx := ctxT(t)
	_, admin := natstest.Connect(t, s, nats.UserInfo("ledger", "ledger-secret"))
	if _, err := appendlog.EnsureStream(ctx, admin, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}

	_, agent := natstest.Connect(t, s, nats.UserInfo("alice", "alice-secret"))
	ack, err := agent.Publish(ctx, "ledger.default.p1.proposal.alice", tProposal("p1", "alice").raw())
	if err != nil || ack.Sequence != 1 {
		t.Fatalf("agent publish as itself: ack=%v err=%v", ack, err)
	}
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if _, err := agent.Publish(short(), "ledger.default.p2.proposal.bob", tProposal("p2", "bob").raw()); err == nil {
		t.Error("agent published as another sender")
	}
	if err := agent.DeleteStream(short(), subjects.StreamName); err == nil {
		t.Error("agent deleted the stream")
	} else {
		t.Logf("agent delete stream: %v", err)
	}

	_, auditor := natstest.Connect(t, s, nats.UserInfo("auditor", "auditor-secret"))
	st, err := auditor.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatalf("auditor stream info: %v", err)
	}
	if m, err := st.GetMsg(ctx, 1); err != nil || m.Subject != "ledger.default.p1.proposal.alice" {
		t.Fatalf("auditor read: %v", err)
	}
	if err := auditor.DeleteStream(short(), subjects.StreamName); err == nil {
		t.Error("auditor deleted the stream")
	}
	c := st.CachedInfo().Config
	c.MaxAge = time.Second
	if _, err := auditor.UpdateStream(short(), c); err == nil {
		t.Error("auditor updated the stream")
	}

	info, err := admin.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatalf("stream gone: %v", err)
	}
	if n := info.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("stream has %d messages, want 1", n)
	}
}
