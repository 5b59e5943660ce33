package natsserver_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

func TestStartDefaults(t *testing.T) {
	s := natstest.Start(t)
	so := s.NatsServer().JetStreamConfig()
	if so == nil {
		t.Fatal("JetStream not enabled")
	}
	if !so.SyncAlways {
		t.Errorf("SyncAlways = false, want the ledger default (sync_interval: always)")
	}
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Errorf("ClientURL = %q, want loopback", s.ClientURL())
	}
	nc, js := natstest.Connect(t, s)
	if got := nc.MaxPayload(); got != natsserver.DefaultMaxPayload {
		t.Errorf("max_payload = %d, want %d", got, natsserver.DefaultMaxPayload)
	}
	ctx := context.Background()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
	s.Shutdown()
	s.Shutdown() // idempotent
	if s.NatsServer().Running() {
		t.Fatal("server still running after Shutdown")
	}
}

func TestSyncInterval(t *testing.T) {
	o := natstest.Options(t)
	o.SyncInterval = 5 * time.Second
	s := natstest.StartWith(t, o)
	cfg := s.NatsServer().JetStreamConfig()
	if cfg.SyncAlways || cfg.SyncInterval != 5*time.Second {
		t.Errorf("sync = always:%v interval:%v, want interval 5s", cfg.SyncAlways, cfg.SyncInterval)
	}
}

func TestValidate(t *testing.T) {
	for name, o := range map[string]natsserver.Options{
		"no store":  {},
		"both sync": {StoreDir: "x", SyncAlways: true, SyncInterval: time.Second},
		"bad port":  {StoreDir: "x", Port: 70000},
		"routes":    {StoreDir: "x", Routes: []string{"nats-route://127.0.0.1:1"}},
	} {
		if _, err := natsserver.Start(context.Background(), o); !errors.Is(err, natsserver.ErrOptions) {
			t.Errorf("%s: err = %v, want ErrOptions", name, err)
		}
	}
}

// A config file supplies authorization; the Options override its listen
// address and add the store dir and JetStream.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	err := os.WriteFile(conf, []byte(`
listen: 127.0.0.1:1
authorization {
  users: [ { user: alice, password: secret } ]
}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = conf
	s := natstest.StartWith(t, o)
	if _, err := nats.Connect(s.ClientURL()); err == nil {
		t.Fatal("connected without credentials; config file authorization not applied")
	}
	nc, _ := natstest.Connect(t, s, nats.UserInfo("alice", "secret"))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(context.Background()); err != nil {
		t.Fatalf("JetStream not available with config file: %v", err)
	}
}

// A taken client port is a fatal error reported at once, not a wait for
// the start timeout (issue 15: it hung 60 s).
func TestStartTakenPortFailsFast(t *testing.T) {
	first := natstest.Start(t)
	port := first.NatsServer().Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Port: port})
	if err == nil {
		s.Shutdown()
		t.Fatal("second server on a taken port started")
	}
	if !errors.Is(err, natsserver.ErrFatal) || ctx.Err() != nil {
		t.Fatalf("err = %v, want ErrFatal before the deadline", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("error does not name the port %d: %v", port, err)
	}
}
