// Package opsrig is the test rig of the ops packages (archive, replay,
// repair and the ops commands): a real in-process JetStream server with the
// LEDGER stream, an appender, traffic in which time matters, and helpers to
// fold the stream into a fresh Pebble store and dump it. Nothing is mocked;
// everything is cleaned up by t.Cleanup.
package opsrig

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// Ledger is a real server with the LEDGER stream.
type Ledger struct {
	Server *natsserver.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	App    *appendlog.Appender
}

// New starts a server, creates the stream and an appender.
func New(t testing.TB) *Ledger {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	app, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	return &Ledger{Server: srv, NC: nc, JS: js, App: app}
}

// Append appends raws (in order, pipelined) to space ("" = default) and
// returns the highest sequence acknowledged.
func (l *Ledger) Append(t testing.TB, space string, raws ...[]byte) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last uint64
	for i, res := range l.App.AppendMany(ctx, space, raws) {
		if res.Err != nil {
			t.Fatalf("append %d (%s): %v", i, raws[i], res.Err)
		}
		last = max(last, res.Seq)
	}
	return last
}

// AppendOne appends one envelope (waiting for its ack: strict order).
func (l *Ledger) AppendOne(t testing.TB, space, raw string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := l.App.Append(ctx, space, []byte(raw))
	if err != nil {
		t.Fatalf("append %s: %v", raw, err)
	}
	return res.Seq
}

// LastSeq returns the stream's last sequence.
func (l *Ledger) LastSeq(t testing.TB) uint64 {
	t.Helper()
	s, err := l.JS.Stream(context.Background(), "LEDGER")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// OpenStore opens a Pebble store in dir (a fresh temp dir when "") and
// closes it in t.Cleanup.
func OpenStore(t testing.TB, dir string) *projections.Store {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "projection")
	}
	s, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Fold rebuilds the whole stream (or up to upTo when > 0) into a fresh
// store.
func (l *Ledger) Fold(t testing.TB, upTo uint64) *projections.Store {
	t.Helper()
	s := OpenStore(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := projector.Rebuild(ctx, l.JS, s, projector.RebuildOptions{UpToSeq: upTo}); err != nil {
		t.Fatal(err)
	}
	return s
}

// Dump returns the store's Dump.
func Dump(t testing.TB, s *projections.Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Env builds a MEW v0.4 envelope.
func Env(id, from, kind string, corr []string, payload string) string {
	c := ""
	if len(corr) > 0 {
		c = `,"correlation_id":["` + corr[0] + `"]`
	}
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"to":["fs-agent"],"kind":%q%s,"payload":%s}`, id, from, kind, c, payload)
}

// Traffic appends a history in which stream time matters, and returns the
// last sequence:
//
//   - "ttl-exp": a proposal with a 150 ms ttl, expired by the ledger's own
//     ledger/expire event (appended by an Expirer after the deadline);
//   - "ttl-late": a 150 ms-ttl proposal fulfilled after its deadline (late,
//     fulfilled_after_expired);
//   - "ttl-open": a pending proposal with a one-hour ttl (its deadline is in
//     the deadline index);
//   - "chained": a proposal fulfilled, the fulfilment answered by a response
//     (keyed by the fulfilment), and "chained-2" rejected with an explanation
//     chat (keyed by the rejection);
//   - n envelopes of seeded workload traffic (orphans, duplicates, foreign
//     withdrawals, responses, chats) in space "default", and a few in space
//     "other".
func (l *Ledger) Traffic(t testing.TB, seed int64, n int) uint64 {
	t.Helper()
	ttl := func(id string, ms int) string {
		return Env(id, "agent-ttl", "mcp/proposal", nil, fmt.Sprintf(`{"method":"tools/call","params":{"name":"x"},"ttl_ms":%d}`, ms))
	}
	l.AppendOne(t, "", ttl("ttl-exp", 150))
	l.AppendOne(t, "", ttl("ttl-late", 150))
	l.AppendOne(t, "", ttl("ttl-open", 3_600_000))
	l.AppendOne(t, "", Env("chained", "agent-c", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"y"}}`))
	l.AppendOne(t, "", Env("chained-2", "agent-c", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"z"}}`))
	l.AppendOne(t, "", Env("chained-f", "human", "mcp/request", []string{"chained"}, `{"method":"tools/call","params":{"name":"y"}}`))
	l.AppendOne(t, "", Env("chained-r", "fs-agent", "mcp/response", []string{"chained-f"}, `{"result":{"ok":true}}`))
	l.AppendOne(t, "", Env("chained-2-rej", "fs-agent", "mcp/reject", []string{"chained-2"}, `{"reason":"unsafe"}`))
	l.AppendOne(t, "", Env("chained-2-why", "fs-agent", "chat", []string{"chained-2-rej"}, `{"text":"outside the sandbox"}`))

	g := workload.New(workload.Options{Seed: seed, Disorder: 5, Duplicates: 3, Foreign: 20,
		Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	l.Append(t, "", g.Batch(n)...)
	o := workload.New(workload.Options{Seed: seed + 1, Prefix: "o-"})
	l.Append(t, "other", o.Batch(20)...)

	// Past the 150 ms deadlines: a late fulfilment, and the expirer's event.
	time.Sleep(200 * time.Millisecond)
	l.AppendOne(t, "", Env("ttl-late-f", "human", "mcp/request", []string{"ttl-late"}, `{"method":"tools/call","params":{"name":"x"}}`))
	s := l.Fold(t, 0)
	ex, err := projector.NewExpirer(s, l.App, projector.ExpirerOptions{Grace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := ex.Scan(ctx); err != nil || n != 1 {
		t.Fatalf("expirer appended %d expiries (%v), want 1 (ttl-exp)", n, err)
	}
	last := l.LastSeq(t)
	// Sanity: the history really depends on time. (Rebuild continues
	// from the store's checkpoint: it folds only the expiry.)
	if _, err := projector.Rebuild(ctx, l.JS, s, projector.RebuildOptions{UpToSeq: last}); err != nil {
		t.Fatal(err)
	}
	check := s
	if p, err := check.Get("default", "ttl-exp"); err != nil || p.State != api.StateExpired {
		t.Fatalf("ttl-exp: %+v %v", p, err)
	}
	if p, err := check.Get("default", "ttl-late"); err != nil || p.State != api.StateExpired || !p.HasAnomaly(api.AnomalyFulfilledAfterExpired) {
		t.Fatalf("ttl-late: %+v %v", p, err)
	}
	return last
}
