package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clearLedgerEnv empties every LEDGER_* variable for the test, so the
// defaults it reads are the built-in ones.
func clearLedgerEnv(t *testing.T) {
	t.Helper()
	for _, v := range []string{"LEDGER_API", "LEDGER_DATA", "LEDGER_NATS_URL", "LEDGER_NATS_CONFIG", "LEDGER_SPACE",
		"LEDGER_TOKEN", "LEDGER_QUIET", "LEDGER_OUTPUT", "LEDGER_PROGRESS", "LEDGER_LOG_FORMAT", "LEDGER_LOG_LEVEL",
		"LEDGER_NATS_USER", "LEDGER_NATS_PASSWORD_FILE", "LEDGER_NATS_NKEY", "LEDGER_REPLICAS"} {
		t.Setenv(v, "")
	}
}

// TestOpsFlagsOnOneLayer: the ops commands' flags are on the one flag
// layer: each reads its documented environment variable, shows it and its
// default (or only that a secret is set) in the common help style, keeps
// its aliases, and an explicit flag beats a variable even when the
// variable's value does not parse.
func TestOpsFlagsOnOneLayer(t *testing.T) {
	clearLedgerEnv(t)
	common := []string{
		"  --data DIR\n      ledger data directory (env LEDGER_DATA; default ./data)",
		"  --nats-url URL\n", "(env LEDGER_NATS_URL)",
		"  --nats-config FILE\n", "(env LEDGER_NATS_CONFIG)",
		"  --log-format FORMAT\n", "(env LEDGER_LOG_FORMAT)",
		"  --log-level LEVEL\n", "(env LEDGER_LOG_LEVEL; default info)",
		"  --progress MODE\n", "(env LEDGER_PROGRESS; default auto)",
		"  -q, --quiet\n", "(env LEDGER_QUIET)",
		"  --nats-user USER\n", "(env LEDGER_NATS_USER)",
		"  --nats-password-file FILE\n", "(env LEDGER_NATS_PASSWORD_FILE)",
		"  --nats-nkey SEEDFILE\n", "(env LEDGER_NATS_NKEY)",
	}
	own := map[string][]string{
		"at": {"  --seq N\n", "  --time TIME\n", "  --tmp DIR\n",
			"  -o, --output table|json\n      table, or json for the API's objects exactly (env LEDGER_OUTPUT; default table)",
			"  --space NAME\n      space (env LEDGER_SPACE; default default)"},
		"export":  {"  -f, --file FILE\n", "  -o, --output jsonl\n", "(default jsonl)", "  --from-seq N\n", "  --to-seq N\n"},
		"import":  {"  -f, --file FILE\n", "  --append\n", "  --force\n", "  --replicas N\n", "  --batch N\n"},
		"rebuild": {"  --api URL\n", "(env LEDGER_API)", "  --token TOKEN\n", "(env LEDGER_TOKEN)"},
		"replay": {"  --since SEQ|TIME\n", "  --until SEQ|TIME\n", "  --space NAME\n", "  --type TYPE\n", "  --proposal ID\n",
			"  --republish-to PREFIX\n", "  --republish-url URL\n", "  --republish-js\n", "  --tmp DIR\n"},
		"verify": {"  --export FILE\n", "  --head HASH\n", "  --tmp DIR\n", "  --api URL\n", "(env LEDGER_API)", "  --token TOKEN\n", "(env LEDGER_TOKEN)"},
	}
	for name, want := range own {
		code, out, errOut := runCLI(t, "", "help", name)
		if code != exitOK {
			t.Fatalf("help %s: exit %d: %s", name, code, errOut)
		}
		if !commands[name].ops {
			t.Errorf("%s is not listed with the ops commands", name)
		}
		for _, w := range append(want, common...) {
			if !strings.Contains(out, w) {
				t.Errorf("help %s lacks %q:\n%s", name, w, out)
			}
		}
		// Flags that read no variable do not claim one.
		for _, no := range []string{"env LEDGER_FILE", "env LEDGER_F)", "env LEDGER_SEQ", "env LEDGER_EXPORT", "env LEDGER_TMP"} {
			if strings.Contains(out, no) {
				t.Errorf("help %s: %q", name, no)
			}
		}
	}
	// The replay --space means "all spaces" by default: LEDGER_SPACE,
	// the client commands' space, must not narrow it.
	if _, out, _ := runCLI(t, "", "help", "replay"); strings.Contains(out, "LEDGER_SPACE") {
		t.Errorf("replay --space reads LEDGER_SPACE:\n%s", out)
	}

	// Variables are the defaults usage shows; a secret only says "set".
	t.Setenv("LEDGER_DATA", "/srv/ledger")
	t.Setenv("LEDGER_TOKEN", "s3cret-token")
	t.Setenv("LEDGER_OUTPUT", "json")
	_, out, _ := runCLI(t, "", "help", "rebuild")
	if !strings.Contains(out, "(env LEDGER_DATA; default /srv/ledger)") || !strings.Contains(out, "(env LEDGER_TOKEN; set)") || strings.Contains(out, "s3cret") {
		t.Errorf("help rebuild with LEDGER_DATA and LEDGER_TOKEN:\n%s", out)
	}
	if _, out, _ := runCLI(t, "", "at", "--help"); !strings.Contains(out, "(env LEDGER_OUTPUT; default json)") {
		t.Errorf("at --help with LEDGER_OUTPUT=json:\n%s", out)
	}
	t.Setenv("LEDGER_DATA", "")
	t.Setenv("LEDGER_TOKEN", "")
	t.Setenv("LEDGER_OUTPUT", "")

	// A variable that does not parse is a usage error naming it, unless
	// the flag is given (the flag beats the variable, bad or not).
	t.Setenv("LEDGER_QUIET", "maybe")
	code, _, errOut := runCLI(t, "", "export", "--nats-url", "nats://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(errOut, `LEDGER_QUIET="maybe"`) {
		t.Errorf("export with LEDGER_QUIET=maybe: %d %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "export", "-q", "--nats-url", "nats://127.0.0.1:1")
	if code != exitUsage || strings.Contains(errOut, "LEDGER_QUIET") || strings.Contains(errOut, "ledger: nats://") || !strings.Contains(errOut, "connect to NATS") {
		t.Errorf("export -q with LEDGER_QUIET=maybe: %d %s", code, errOut)
	}
	// --help works whatever the environment holds.
	if code, out, errOut := runCLI(t, "", "export", "--help"); code != exitOK || !strings.HasPrefix(out, "Usage: ledger export") {
		t.Errorf("export --help with LEDGER_QUIET=maybe: %d %s", code, errOut)
	}
	t.Setenv("LEDGER_QUIET", "")
	t.Setenv("LEDGER_REPLICAS", "three")
	if code, _, errOut := runCLI(t, "", "serve", "--replicas", "3", "--http", "nowhere"); code != exitUsage || strings.Contains(errOut, "LEDGER_REPLICAS") || !strings.Contains(errOut, "HTTP address") {
		t.Errorf("serve --replicas 3 with LEDGER_REPLICAS=three: %d %s", code, errOut)
	}
	t.Setenv("LEDGER_REPLICAS", "")

	// -f and --file are one flag (import's was a bare -f).
	for _, args := range [][]string{{"import", "-f", "/no/such/export.jsonl"}, {"import", "--file", "/no/such/export.jsonl"}, {"import", "-f=/no/such/export.jsonl"}} {
		if code, _, errOut := runCLI(t, "", args...); code != exitFailed || !strings.Contains(errOut, "/no/such/export.jsonl") {
			t.Errorf("%v: %d %s", args, code, errOut)
		}
	}
	// Positional arguments are refused by the commands that take none.
	for _, name := range []string{"export", "import", "rebuild", "replay", "verify"} {
		if code, _, errOut := runCLI(t, "", name, "stray"); code != exitUsage || !strings.Contains(errOut, `unexpected argument "stray"`) {
			t.Errorf("%s stray: %d %s", name, code, errOut)
		}
	}
}

// TestAtQueryFlags: the query after `ledger at` has its own flags on the
// same layer: --help shows them in the common style (exit 0), an unknown
// one is a usage error naming the query, and flags may follow the ID.
func TestAtQueryFlags(t *testing.T) {
	clearLedgerEnv(t)
	code, out, errOut := runCLI(t, "", "at", "--seq", "1", "list", "--help")
	if code != exitOK || !strings.HasPrefix(out, "Usage: ledger at --seq N | --time T [flags] list ") {
		t.Fatalf("at list --help: %d %q %s", code, out, errOut)
	}
	for _, w := range []string{"  --state STATE\n", "  --proposer NAME\n", "  --target NAME\n", "  --anomaly KIND\n",
		"  --since TIME\n", "  --until TIME\n", "  --limit N\n", "  --cursor CURSOR\n", "  --space NAME\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("at list --help lacks %q:\n%s", w, out)
		}
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		if l == "Flags:" {
			for j := i + 1; j < len(lines); j += 2 {
				if !helpFlagLine.MatchString(lines[j]) || !strings.HasPrefix(lines[j+1], "      ") {
					t.Errorf("at list --help: %q is not in the common style", lines[j])
				}
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"at", "--seq", "1", "list", "--bogus"}, "at list: unknown flag --bogus"},
		{[]string{"at", "--seq", "1", "get"}, "at get: want exactly one proposal id"},
		{[]string{"at", "--seq", "1", "get", "a", "b"}, "at get: want exactly one proposal id"},
		{[]string{"at", "--seq", "1", "stats", "x"}, `at stats: unexpected argument "x"`},
		{[]string{"at", "--seq", "1", "list", "--since", "yesterday"}, "at list:"},
		{[]string{"at", "--seq", "1", "frob"}, `unknown query "frob"`},
		{[]string{"at", "list"}, "give exactly one of --seq N and --time T"},
	} {
		if code, _, errOut := runCLI(t, "", c.args...); code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %s, want exit %d and %q", c.args, code, errOut, exitUsage, c.want)
		}
	}
	// Flags after the ID parse (no ledger on the data directory: the
	// query parsed, the command then reports no ledger, exit 2).
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, "", "at", "--data", dir, "--seq", "1", "get", "x", "--space", "other"); code != exitUsage || !strings.Contains(errOut, "no NATS server") {
		t.Errorf("at get x --space other: %d %s", code, errOut)
	}
}

// TestBridgeSaysWhichLedger: the bridge names the ledger it appends to,
// like every command that talks to one, and -q silences it. (A cancelled
// context: the bridge stops before it reaches the gateway.)
func TestBridgeSaysWhichLedger(t *testing.T) {
	clearLedgerEnv(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	args := []string{"bridge", "--gateway", "ws://127.0.0.1:1", "--mew-space", "s", "--participant", "p", "--token-file", token,
		"--api", "http://127.0.0.1:1", "--log-level", "error"}
	for _, quiet := range []bool{false, true} {
		a := args
		if quiet {
			a = append(a, "-q")
		}
		var out, errb bytes.Buffer
		run(ctx, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb}, a)
		said := strings.HasPrefix(errb.String(), "ledger: http://127.0.0.1:1 (--api)\n")
		if said == quiet {
			t.Errorf("bridge (quiet %v): stderr %q", quiet, errb.String())
		}
	}
}
