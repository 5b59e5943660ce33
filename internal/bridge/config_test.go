package bridge_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/bridge"
)

// TestDeployExampleLoads: deploy/bridge/bridges.yaml is a valid
// configuration, and its bridges' options validate.
func TestDeployExampleLoads(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "bridge", "bridges.yaml")
	c, err := bridge.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Bridges) != 2 {
		t.Fatalf("%d bridges", len(c.Bridges))
	}
	o, err := c.Bridges[0].Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.Gateway != "ws://127.0.0.1:8080" || o.MEWSpace != "research" || o.Participant != "ledger-recorder-a" || o.Token == "" ||
		o.ProbeInterval != time.Second || o.EchoAfter != time.Second || o.BackoffMax != 30*time.Second {
		t.Errorf("options %+v", o)
	}
	for i, bc := range c.Bridges {
		o, err := bc.Options()
		if err != nil {
			t.Fatal(err)
		}
		o.Sink = bridge.AppenderSink{}
		if err := o.Validate(); err != nil {
			t.Errorf("bridges[%d]: %v", i, err)
		}
	}
	if c.Bridges[1].History != "/srv/mew/research/.mew/logs/envelope-history.jsonl" || c.Bridges[1].MEWSpace != "research" {
		t.Errorf("history %q", c.Bridges[1].History)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"bridges: []", "no bridges"},
		{"bridges:\n  - {gateway: ws://h:1, participant: p, token_file: tok}", "bridges[0].mew_space"},
		{"bridges:\n  - {mew_space: m, participant: p, token_file: tok}", "bridges[0].gateway"},
		{"bridges:\n  - {mew_space: m, gateway: ws://h:1, token_file: tok}", "bridges[0].participant"},
		{"bridges:\n  - {mew_space: m, gateway: ws://h:1, participant: p}", "bridges[0].token_file"},
		{"bridges:\n  - {mew_space: m, gateway: ws://h:1, participant: p, token_file: empty}", "is empty"},
		{"bridges:\n  - {mew_space: m, gateway: ws://h:1, participant: p, token_file: tok, color: red}", "color"},
		{"bridges:\n  - {mew_space: m, gateway: ws://h:1, participant: p, token_file: tok}\n  - {mew_space: m, gateway: ws://h:2, participant: p, token_file: tok}", "evict each other"},
	} {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := bridge.LoadConfig(p)
		if err == nil || !errors.Is(err, bridge.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %q", tc.yaml, err, tc.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	base := func() bridge.Options {
		return bridge.Options{Gateway: "ws://127.0.0.1:1/ws", MEWSpace: "m", Participant: "p", Sink: bridge.AppenderSink{}}
	}
	o := base()
	if err := o.Validate(); err != nil || o.Space != "m" || o.BackoffMin != bridge.DefaultBackoffMin || o.ProbeInterval != bridge.DefaultProbeInterval {
		t.Fatalf("%+v %v", o, err)
	}
	for name, edit := range map[string]func(*bridge.Options){
		"no sink":        func(o *bridge.Options) { o.Sink = nil },
		"no space":       func(o *bridge.Options) { o.MEWSpace = "" },
		"no participant": func(o *bridge.Options) { o.Participant = "" },
		"ledger":         func(o *bridge.Options) { o.Participant = "ledger" },
		"http gateway":   func(o *bridge.Options) { o.Gateway = "http://h:1" },
		"no gateway":     func(o *bridge.Options) { o.Gateway = "" },
		"backoff":        func(o *bridge.Options) { o.BackoffMin, o.BackoffMax = time.Second, time.Millisecond },
		"control char":   func(o *bridge.Options) { o.Participant = "a\nb" },
	} {
		o := base()
		edit(&o)
		if err := o.Validate(); !errors.Is(err, bridge.ErrOptions) {
			t.Errorf("%s: %v", name, err)
		}
	}
	o = base()
	o.Gateway, o.HistoryFile = "", "/tmp/h.jsonl"
	if err := o.Validate(); err != nil {
		t.Errorf("history without gateway: %v", err)
	}
	o.Sink = bridge.HTTPSink{}
	if _, err := bridge.New(o); !errors.Is(err, bridge.ErrOptions) {
		t.Errorf("history over HTTP: %v", err)
	}
}
