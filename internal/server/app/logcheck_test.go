package app_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// publishFolded appends the test proposal and waits until it is folded.
func publishFolded(t *testing.T, a *app.App) uint64 {
	t.Helper()
	c := newClient(t, a)
	r, err := c.Publish(context.Background(), "", []byte(proposal))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(context.Background(), "env-req-1", apitest.ReadOptions{MinSeq: r.Seq}); err != nil {
		t.Fatal(err)
	}
	return r.Seq
}

// waitNotReady polls /readyz until it is 503 and returns its body.
func waitNotReady(t *testing.T, a *app.App) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(a.HTTPURL() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "log and projection disagree") {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after 60s: %s", resp.StatusCode, b)
		}
	}
}

// Issue 15, item 2: the stream deleted under a running ledger is noticed
// (not ready, log_problem in /v1/status, online verify fails at once with
// it), and a restart does not recreate it empty under the projection.
func TestStreamDeletedWhileServing(t *testing.T) {
	o := apptest.Options(t)
	o.LogCheckInterval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	<-a.Ready()
	seq := publishFolded(t, a)

	_, js := natstest.ConnectURL(t, a.NATSURL())
	if err := js.DeleteStream(context.Background(), subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	body := waitNotReady(t, a)
	if !strings.Contains(body, "stream LEDGER is missing") {
		t.Fatalf("/readyz: %s", body)
	}
	st, err := newClient(t, a).Status(context.Background())
	if err != nil || !strings.Contains(st.LogProblem, "is missing") || st.ProjectedSeq != seq {
		t.Fatalf("status %+v (%v), want log_problem naming the missing stream", st, err)
	}
	// Online verify and rebuild: a clear 503 not_ready naming the
	// problem, not 409 busy (issue 29 item 8).
	var ae *api.Error
	if _, err := newClient(t, a).Verify(context.Background()); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable ||
		ae.Code != api.CodeNotReady || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("online verify: %v, want 503 not_ready with the log problem at once", err)
	}
	if _, err := newClient(t, a).StartRebuild(context.Background()); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable ||
		ae.Code != api.CodeNotReady || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("online rebuild: %v, want 503 not_ready with the log problem at once", err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Restart: the stream is not recreated empty.
	_, err = app.New(context.Background(), o)
	if !errors.Is(err, app.ErrLogProblem) || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("restart on a deleted stream: %v, want ErrLogProblem", err)
	}
	srv, err := natsserver.Start(context.Background(), natsserver.Options{StoreDir: o.NATSDir(), Port: natsserver.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	_, js = natstest.Connect(t, srv)
	if _, err := js.Stream(context.Background(), subjects.StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the failed start created the stream: %v", err)
	}
}

// A stream deleted and created again (empty, with the ledger's own
// configuration) while the ledger was stopped: the start fails saying
// so, instead of serving a projection ahead of its log.
func TestStreamRecreatedWhileStopped(t *testing.T) {
	o := apptest.Options(t)
	a := apptest.StartWith(t, o)
	publishFolded(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Start(context.Background(), natsserver.Options{StoreDir: o.NATSDir(), Port: natsserver.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	if err := js.DeleteStream(ctx, subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	_, err = app.New(ctx, o)
	if !errors.Is(err, app.ErrLogProblem) || !strings.Contains(err.Error(), "was recreated") {
		t.Fatalf("start on a recreated stream: %v, want ErrLogProblem saying it was recreated", err)
	}
}

// Someone sets a max age on the stream (which would age the ledger's
// history out): the ledger puts its own setting back and says so; it
// stays ready (nothing was lost yet).
func TestStreamMaxAgeEditedIsPutBack(t *testing.T) {
	logs := &syncBuffer{}
	a := apptest.Start(t, func(o *app.Options) {
		o.LogCheckInterval = 50 * time.Millisecond
		o.Logger = o.Logger.Output(logs)
	})
	publishFolded(t, a)
	_, js := natstest.ConnectURL(t, a.NATSURL())
	ctx := context.Background()
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxAge, cfg.Duplicates = 30*time.Second, 30*time.Second
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxAge == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("max_age still %v after 60s", info.Config.MaxAge)
		}
	}
	for deadline := testctx.Deadline(t); ; time.Sleep(20 * time.Millisecond) {
		s := logs.String()
		if strings.Contains(s, "max_age was 30s, put back to 0s") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line names the setting put back:\n%s", s)
		}
	}
	if p := a.LogProblem(); p != "" {
		t.Fatalf("log problem %q after a setting put back in time", p)
	}
}

// syncBuffer is a log writer safe for the ledger's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestForeignDurableDeleted: with a list of the ledger's durables (what
// --auth's nats.service.durables gives), a durable consumer someone else
// created on LEDGER — an auditor may create consumers to read the log,
// and NATS permissions cannot tell a durable from an ephemeral one — is
// deleted at the next log check; the listed durables, the projector's own
// and ephemeral consumers are left alone.
func TestForeignDurableDeleted(t *testing.T) {
	a := apptest.Start(t, func(o *app.Options) {
		o.Durables = []string{"projector-b"}
		o.LogCheckInterval = 50 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := a.JetStream().Stream(ctx, "LEDGER")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"intruder", "projector-b"} {
		if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: d, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	eph, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ephName := eph.CachedInfo().Name
	for {
		_, err := s.Consumer(ctx, "intruder")
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the foreign durable is still there: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range []string{"projector-b", a.Options().Durable, ephName} {
		if _, err := s.Consumer(ctx, name); err != nil {
			t.Errorf("consumer %q: %v, want it kept", name, err)
		}
	}
}

// TestDupWindowFlagIsTheLedgers: the operator's --dup-window is applied
// to the stream at start and is what the log check compares with: it is
// not put back to the default while serving, and a window someone else
// set is put back to it.
func TestDupWindowFlagIsTheLedgers(t *testing.T) {
	dir := t.TempDir()
	logs := &syncBuffer{}
	edit := func(w time.Duration) func(*app.Options) {
		return func(o *app.Options) {
			o.DataDir = dir
			o.DupWindow = w
			o.LogCheckInterval = 50 * time.Millisecond
			o.Logger = o.Logger.Output(logs)
		}
	}
	a := apptest.Start(t, edit(3*time.Second))
	publishFolded(t, a)
	_, js := natstest.ConnectURL(t, a.NATSURL())
	ctx := context.Background()
	window := func() time.Duration {
		t.Helper()
		st, err := js.Stream(ctx, subjects.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.Duplicates
	}
	if w := window(); w != 3*time.Second {
		t.Fatalf("duplicate window %v, want the flag's 3s", w)
	}
	time.Sleep(300 * time.Millisecond) // a few log checks
	if w := window(); w != 3*time.Second || strings.Contains(logs.String(), "duplicate_window was") || a.LogProblem() != "" {
		t.Fatalf("the log check changed the operator's window (now %v, problem %q):\n%s", w, a.LogProblem(), logs.String())
	}
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Duplicates = 30 * time.Second
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for deadline := testctx.Deadline(t); !strings.Contains(logs.String(), "duplicate_window was 30s, put back to 3s"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("someone else's window not put back:\n%s", logs.String())
		}
	}
	if w := window(); w != 3*time.Second || a.LogProblem() != "" {
		t.Fatalf("window %v, problem %q", w, a.LogProblem())
	}
	// Restarted with another flag: the stream takes it.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = apptest.Start(t, edit(5*time.Second))
	_, js = natstest.ConnectURL(t, a.NATSURL())
	if w := window(); w != 5*time.Second || a.LogProblem() != "" {
		t.Fatalf("after a restart with --dup-window 5s: window %v, problem %q", w, a.LogProblem())
	}
}
