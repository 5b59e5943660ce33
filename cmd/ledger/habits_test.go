package main

import (
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// TestTopLevelVersion: --version (and -v, -version, -V) print what
// `ledger version` prints.
func TestTopLevelVersion(t *testing.T) {
	_, want, _ := runCLI(t, "", "version")
	for _, arg := range []string{"--version", "-version", "-v", "-V"} {
		code, out, errOut := runCLI(t, "", arg)
		if code != exitOK || out != want || !strings.HasPrefix(out, "ledger ") {
			t.Errorf("ledger %s: exit %d, out %q (want %q), stderr %q", arg, code, out, want, errOut)
		}
	}
	if _, out, _ := runCLI(t, "", "--help"); !strings.Contains(out, "ledger --version") {
		t.Errorf("--help does not mention --version:\n%s", out)
	}
}

// TestFlagErrorsInOwnWords: the standard library's flag errors are said in
// the CLI's words and spelling, with the usage hint, exit status 2.
func TestFlagErrorsInOwnWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--bogus"}, "ledger get: unknown flag --bogus\nRun 'ledger help get' for usage.\n"},
		{[]string{"get", "-bogus"}, "ledger get: unknown flag --bogus\n"},
		{[]string{"list", "-x"}, "ledger list: unknown flag -x\n"},
		{[]string{"get", "--api"}, "ledger get: --api needs a value (URL)\n"},
		{[]string{"list", "-o"}, "ledger list: -o needs a value (table|json)\n"},
		{[]string{"list", "--limit", "many"}, "ledger list: --limit \"many\": not a valid number\n"},
		{[]string{"get", "--quiet=maybe"}, "ledger get: --quiet \"maybe\": not a valid boolean (true or false)\n"},
		{[]string{"get", "--timeout", "soon"}, "ledger get: --timeout \"soon\": "},
	} {
		code, _, errOut := runCLI(t, "", c.args...)
		if code != exitUsage || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
		if strings.Contains(errOut, "flag provided but not defined") || strings.Contains(errOut, "flag needs an argument") ||
			strings.Contains(errOut, "parse error") {
			t.Errorf("%v: the standard library's words: %q", c.args, errOut)
		}
	}
}

// TestQuietEnvWords: LEDGER_QUIET takes yes/no and on/off as well as
// 1/true; a word it does not know is a usage error naming the variable.
func TestQuietEnvWords(t *testing.T) {
	a := apptest.Start(t)
	for _, v := range []string{"LEDGER_API", "LEDGER_SPACE", "LEDGER_TIMEOUT"} {
		t.Setenv(v, "")
	}
	apiURL := "--api=" + a.HTTPURL()
	for _, c := range []struct {
		val   string
		quiet bool
	}{{"yes", true}, {"YES", true}, {"1", true}, {"true", true}, {"on", true}, {"no", false}, {"0", false}, {"off", false}} {
		t.Setenv("LEDGER_QUIET", c.val)
		code, _, errOut := runCLI(t, "", "stats", apiURL)
		if code != exitOK {
			t.Fatalf("LEDGER_QUIET=%s: exit %d %s", c.val, code, errOut)
		}
		if said := strings.Contains(errOut, "ledger: "+a.HTTPURL()); said == c.quiet {
			t.Errorf("LEDGER_QUIET=%s: stderr %q, want quiet=%v", c.val, errOut, c.quiet)
		}
	}
	t.Setenv("LEDGER_QUIET", "perhaps")
	if code, _, errOut := runCLI(t, "", "stats", apiURL); code != exitUsage || !strings.Contains(errOut, `LEDGER_QUIET="perhaps"`) {
		t.Errorf("LEDGER_QUIET=perhaps: exit %d %q", code, errOut)
	}
}

// TestTimeout: --timeout (and LEDGER_TIMEOUT) bound a client command's
// requests: a watch that would stream forever ends with a timeout (exit
// 1) after what it printed; a bad value is a usage error naming the
// variable.
func TestTimeout(t *testing.T) {
	a := apptest.Start(t)
	for _, v := range []string{"LEDGER_API", "LEDGER_SPACE", "LEDGER_TIMEOUT", "LEDGER_QUIET"} {
		t.Setenv(v, "")
	}
	apiURL := "--api=" + a.HTTPURL()
	if code, _, errOut := runCLI(t, e2eProposal, "publish", apiURL, "--timeout", "30s"); code != exitOK {
		t.Fatalf("publish --timeout 30s: %d %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "", "watch", apiURL, "--since-seq", "0", "--timeout", "1s", "-o", "json")
	if code != exitFailed || !strings.Contains(errOut, "--timeout") || !strings.Contains(out, "env-req-1") {
		t.Fatalf("watch --timeout 1s: exit %d, stdout %q, stderr %q; want 1, the change, and a timeout", code, out, errOut)
	}
	t.Setenv("LEDGER_TIMEOUT", "1s")
	if code, _, errOut := runCLI(t, "", "watch", apiURL, "--since-seq", "0"); code != exitFailed || !strings.Contains(errOut, "--timeout") {
		t.Fatalf("watch with LEDGER_TIMEOUT=1s: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "get", apiURL, "env-req-1"); code != exitOK {
		t.Fatalf("get with LEDGER_TIMEOUT=1s: exit %d %s", code, errOut)
	}
	t.Setenv("LEDGER_TIMEOUT", "soon")
	if code, _, errOut := runCLI(t, "", "get", apiURL, "env-req-1"); code != exitUsage || !strings.Contains(errOut, `LEDGER_TIMEOUT="soon"`) {
		t.Fatalf("LEDGER_TIMEOUT=soon: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "get", apiURL, "env-req-1", "--timeout", "2s"); code != exitOK {
		t.Fatalf("--timeout beats a bad LEDGER_TIMEOUT: exit %d %q", code, errOut)
	}
	t.Setenv("LEDGER_TIMEOUT", "")
	for _, cmd := range []string{"get", "history", "list", "stats", "watch", "publish"} {
		if _, out, _ := runCLI(t, "", cmd, "--help"); !strings.Contains(out, "--timeout D") || !strings.Contains(out, "LEDGER_TIMEOUT") {
			t.Errorf("%s --help lacks --timeout:\n%s", cmd, out)
		}
	}
}

// TestAPIAtNATSPort: --api pointed at the NATS port says so in the CLI's
// words, not with the server's INFO line.
func TestAPIAtNATSPort(t *testing.T) {
	t.Setenv("LEDGER_API", "")
	t.Setenv("LEDGER_TIMEOUT", "")
	s := natstest.Start(t)
	apiURL := "http" + strings.TrimPrefix(s.ClientURL(), "nats")
	for _, args := range [][]string{{"get", "x"}, {"stats"}, {"list"}} {
		code, _, errOut := runCLI(t, "", append(args, "--api", apiURL, "-q")...)
		if code != exitUsage || !strings.Contains(errOut, "--api "+apiURL+": that is a NATS server") ||
			!strings.Contains(errOut, "--nats-url") || strings.Contains(errOut, "server_id") {
			t.Errorf("%v at the NATS port: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestHealth: `ledger health` exits 0 when the ledger's /readyz (or, with
// --live, /healthz) says 200, and 1 — never 2, which Docker reserves —
// when nothing answers or a NATS server does; without --api it finds the
// port of LEDGER_HTTP on the loopback (the container's case).
func TestHealth(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_HTTP", "LEDGER_TIMEOUT"} {
		t.Setenv(v, "")
	}
	a := apptest.Start(t)
	<-a.Ready()
	for _, args := range [][]string{{"health", "--api", a.HTTPURL()}, {"health", "--live", "--api", a.HTTPURL()}} {
		if code, out, errOut := runCLI(t, "", args...); code != exitOK || out != "" || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and silence", args, code, out, errOut)
		}
	}
	if code, out, _ := runCLI(t, "", "health", "--verbose", "--api", a.HTTPURL()); code != exitOK || out == "" {
		t.Errorf("health --verbose: exit %d, stdout %q", code, out)
	}
	t.Setenv("LEDGER_HTTP", "0.0.0.0:"+a.HTTPAddr()[strings.LastIndex(a.HTTPAddr(), ":")+1:])
	if code, _, errOut := runCLI(t, "", "health"); code != exitOK {
		t.Errorf("health with LEDGER_HTTP: exit %d %s", code, errOut)
	}
	t.Setenv("LEDGER_HTTP", "")
	s := natstest.Start(t)
	nats := "http" + strings.TrimPrefix(s.ClientURL(), "nats")
	if code, _, errOut := runCLI(t, "", "health", "--api", nats); code != exitFailed || !strings.Contains(errOut, "NATS server") {
		t.Errorf("health at the NATS port: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "health", "--api", "http://127.0.0.1:1", "--timeout", "2s"); code != exitFailed || !strings.Contains(errOut, "no answer") {
		t.Errorf("health with no ledger: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "health", "--api", a.HTTPURL()+"/nowhere"); code != exitFailed || !strings.Contains(errOut, "404") {
		t.Errorf("health at a 404: exit %d %q", code, errOut)
	}
}

// TestServeNATSMonitorFlag: --nats-monitor (env LEDGER_NATS_MONITOR)
// reaches the ledger's options: a bad address is refused by them.
func TestServeNATSMonitorFlag(t *testing.T) {
	t.Setenv("LEDGER_NATS_MONITOR", "")
	if _, out, _ := runCLI(t, "", "serve", "--help"); !strings.Contains(out, "--nats-monitor ADDR") || !strings.Contains(out, "LEDGER_NATS_MONITOR") {
		t.Fatalf("serve --help lacks --nats-monitor:\n%s", out)
	}
	code, _, errOut := runCLI(t, "", "serve", "--data", t.TempDir(), "--nats-monitor", "8222")
	if code != exitUsage || !strings.Contains(errOut, `NATS monitor address "8222"`) {
		t.Fatalf("serve --nats-monitor 8222: exit %d %q", code, errOut)
	}
	t.Setenv("LEDGER_NATS_MONITOR", "127.0.0.1:99999")
	if code, _, errOut := runCLI(t, "", "serve", "--data", t.TempDir()); code != exitUsage || !strings.Contains(errOut, "NATS monitor address") {
		t.Fatalf("LEDGER_NATS_MONITOR=127.0.0.1:99999: exit %d %q", code, errOut)
	}
}
