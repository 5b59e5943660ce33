package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

const (
	proposal = `{"protocol":"mew/v0.4","id":"env-req-1","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file"}}}`
	fulfil   = `{"protocol":"mew/v0.4","id":"env-fulfill-1","from":"human-user","to":["target-agent"],"kind":"mcp/request","correlation_id":["env-req-1"],"payload":{"method":"tools/call","params":{"name":"write_file"}}}`
)

func newClient(t *testing.T, a *app.App) *apitest.Client {
	t.Helper()
	c, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOptionsValidate(t *testing.T) {
	for name, o := range map[string]app.Options{
		"http addr":     {HTTPAddr: "nope"},
		"nats port":     {NATSListen: "127.0.0.1:99999"},
		"nats addr":     {NATSListen: "4222"},
		"replicas":      {Replicas: 9},
		"sync":          {SyncInterval: -1},
		"durable":       {Durable: "a.b"},
		"ready lag":     {ReadyLag: -5},
		"batch bytes":   {MaxBatchBytes: -1},
		"shutdown wait": {ShutdownTimeout: -1},
		"dup window":    {DupWindow: app.MinDupWindow / 2},
	} {
		if err := o.EnsureDefaults().Validate(); !errors.Is(err, app.ErrOptions) {
			t.Errorf("%s: Validate() = %v, want ErrOptions", name, err)
		}
	}
	var o app.Options
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if o.DataDir != app.DefaultDataDir || o.HTTPAddr != app.DefaultHTTPAddr || o.NATSListen != app.DefaultNATSListen ||
		o.Space != "default" || o.Replicas != 1 || o.Durable != app.DefaultDurable || o.ReadyLag != app.DefaultReadyLag || !o.Embedded() ||
		o.DupWindow != app.DefaultDupWindow {
		t.Fatalf("defaults %+v", o)
	}
}

func TestCloseBeforeRunAndTwice(t *testing.T) {
	a, err := app.New(context.Background(), apptest.Options(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); !errors.Is(err, app.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
}

func TestRunStopsOnContextAndRestartKeepsState(t *testing.T) {
	o := apptest.Options(t)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	<-a.Ready()

	// The address file names the real addresses while serving.
	var addr api.Addr
	data, err := os.ReadFile(a.Options().AddrFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &addr); err != nil || addr.HTTP != a.HTTPAddr() || addr.NATS != a.NATSURL() {
		t.Fatalf("addr file %s (%v), want %s %s", data, err, a.HTTPAddr(), a.NATSURL())
	}

	c := newClient(t, a)
	r1, err := c.Publish(ctx, "", []byte(proposal))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Publish(ctx, "", []byte(fulfil))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, "env-req-1", apitest.ReadOptions{MinSeq: r2.Seq}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := a.Close(); err != nil { // after Run: a no-op
		t.Fatal(err)
	}
	if _, err := os.Stat(o.AddrFile()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("address file left after shutdown: %v", err)
	}

	// Same data directory: same state, and the log goes on.
	b := apptest.StartWith(t, o)
	if got := b.Store().AppliedSeq(); got != r2.Seq {
		t.Fatalf("after restart the projection is at %d, want %d", got, r2.Seq)
	}
	c = newClient(t, b)
	p, _, err := c.Get(context.Background(), "env-req-1", apitest.ReadOptions{})
	if err != nil || p.State != api.StateFulfilled || p.CreatedSeq != r1.Seq {
		t.Fatalf("after restart: %+v, %v", p, err)
	}
	dup, err := c.Publish(context.Background(), "", []byte(proposal))
	if err != nil || dup.Seq != r1.Seq || !dup.Duplicate {
		t.Fatalf("retry after restart: %+v %v", dup, err)
	}
}

func TestSubmitThroughNATS(t *testing.T) {
	a := apptest.Start(t)
	ctx := context.Background()
	sub, err := submit.DialSubmitter(ctx, a.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r, err := sub.Submit(ctx, "default", []byte(proposal))
	if err != nil || r.Error != nil || r.ID != "env-req-1" || r.Seq == 0 {
		t.Fatalf("submit: %+v %v", r, err)
	}
	bad, err := sub.Submit(ctx, "default", []byte(`{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/request","payload":{}}`))
	if err != nil || bad.Error == nil || bad.Error.Code != "missing_correlation" || bad.Error.Field != "correlation_id" {
		t.Fatalf("refused submit: %+v (%+v) %v", bad, bad.Error, err)
	}
	p, _, err := newClient(t, a).Get(ctx, "env-req-1", apitest.ReadOptions{MinSeq: r.Seq})
	if err != nil || p.State != api.StatePending {
		t.Fatalf("get: %+v %v", p, err)
	}
}

func TestExternalNATS(t *testing.T) {
	srv := natstest.Start(t)
	a := apptest.Start(t, func(o *app.Options) { o.NATSURLs = []string{srv.ClientURL()} })
	if a.NATSServer() != nil {
		t.Fatal("an embedded server was started with NATSURLs")
	}
	if a.NATSURL() != srv.ClientURL() {
		t.Fatalf("NATS URL %s, want %s", a.NATSURL(), srv.ClientURL())
	}
	c := newClient(t, a)
	r, err := c.Publish(context.Background(), "", []byte(proposal))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(context.Background(), "env-req-1", apitest.ReadOptions{MinSeq: r.Seq}); err != nil {
		t.Fatal(err)
	}
}

// TestNewFailsCleanly: when New fails after acquiring some things (here
// the HTTP port is taken, after NATS and the store are up), it releases
// them and returns the error (it used to panic on a nil App).
func TestNewFailsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := apptest.Options(t)
	o.HTTPAddr = ln.Addr().String()
	if _, err := app.New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "HTTP listen") {
		t.Fatalf("New with the HTTP port taken: %v", err)
	}
	// Everything was released: the same data directory starts.
	apptest.StartWith(t, apptest.Options(t))
	o.HTTPAddr = "127.0.0.1:0"
	apptest.StartWith(t, o)
}
