package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func TestDispatch(t *testing.T) {
	if code, _, stderr := runCLI(t, ""); code != exitUsage || !strings.Contains(stderr, "Commands:") {
		t.Errorf("no args: %d %s", code, stderr)
	}
	code, stdout, _ := runCLI(t, "", "--help")
	if code != exitOK {
		t.Errorf("--help: %d", code)
	}
	for _, c := range []string{"serve", "publish", "get", "history", "list", "stats"} {
		if !strings.Contains(stdout, "  "+c+" ") {
			t.Errorf("--help does not list %s:\n%s", c, stdout)
		}
	}
	if code, _, stderr := runCLI(t, "", "frobnicate"); code != exitUsage || !strings.Contains(stderr, `no command "frobnicate"`) {
		t.Errorf("unknown command: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "get", "a", "b"); code != exitUsage || !strings.Contains(stderr, "exactly one proposal ID") {
		t.Errorf("get a b: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "get", "a", "-o", "yaml"); code != exitUsage || !strings.Contains(stderr, "--output") {
		t.Errorf("get -o yaml: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "serve", "--sync-interval", "sometimes"); code != exitUsage || !strings.Contains(stderr, "sync-interval") {
		t.Errorf("serve bad sync: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "serve", "--http", "nowhere"); code != exitUsage || !strings.Contains(stderr, "HTTP address") {
		t.Errorf("serve bad http: %d %s", code, stderr)
	}
}

func TestFlagsReadEnvironment(t *testing.T) {
	t.Setenv("LEDGER_DATA", "/srv/ledger")
	t.Setenv("LEDGER_READY_LAG", "7")
	code, stdout, _ := runCLI(t, "", "help", "serve")
	if code != exitOK {
		t.Fatalf("help serve: %d", code)
	}
	for _, want := range []string{
		"--data DIR", "env LEDGER_DATA; default /srv/ledger",
		"env LEDGER_HTTP; default 127.0.0.1:8080",
		"env LEDGER_NATS_LISTEN; default 127.0.0.1:4222",
		"env LEDGER_NATS_URL", "env LEDGER_SPACE", "env LEDGER_LOG_FORMAT", "env LEDGER_LOG_LEVEL",
		"env LEDGER_SYNC_INTERVAL; default always", "env LEDGER_REPLICAS", "env LEDGER_DURABLE",
		"env LEDGER_READY_LAG; default 7",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help serve lacks %q:\n%s", want, stdout)
		}
	}
	t.Setenv("LEDGER_REPLICAS", "three")
	if code, _, stderr := runCLI(t, "", "serve"); code != exitUsage || !strings.Contains(stderr, "LEDGER_REPLICAS") {
		t.Errorf("bad LEDGER_REPLICAS: %d %s", code, stderr)
	}
	t.Setenv("LEDGER_API", "http://127.0.0.1:1")
	if code, _, stderr := runCLI(t, "", "stats"); code != exitUsage || !strings.Contains(stderr, "cannot reach the ledger at http://127.0.0.1:1") {
		t.Errorf("stats with LEDGER_API: %d %s", code, stderr)
	}
}

// TestOpsReadDispatcherStdin: `verify --export -` reads the stdin the
// dispatcher was given, not the process's.
func TestOpsReadDispatcherStdin(t *testing.T) {
	code, _, stderr := runCLI(t, "this is not an export\n", "verify", "--export", "-")
	if code != exitFailed || !strings.Contains(stderr, "line 1") {
		t.Fatalf("verify --export - with a bad stdin: %d %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "", "verify", "--export", "-")
	if code != exitOK || !strings.Contains(stdout, `"ok": true`) {
		t.Fatalf("verify --export - with an empty stdin: %d %s %s", code, stdout, stderr)
	}
}
