package main

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// helpFlagLine is a flag's first line in every command's usage:
// "  --name META" or "  -o, --output META".
var helpFlagLine = regexp.MustCompile(`^  (-[A-Za-z], )?--[a-z][a-z0-9-]*( \S+)?$`)

// TestHelpOneStyle runs every subcommand's --help (and `ledger help CMD`)
// and checks they share one style: "Usage: ledger CMD ...", a sentence
// saying what it does, and a Flags section of "--flag META" lines, each
// followed by its description indented six spaces.
func TestHelpOneStyle(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, args := range [][]string{{n, "--help"}, {"help", n}} {
			code, out, errOut := runCLI(t, "", args...)
			if code != exitOK {
				t.Errorf("%v: exit %d: %s", args, code, errOut)
				continue
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if !strings.HasPrefix(lines[0], "Usage: ledger "+n) {
				t.Errorf("%v: first line %q, want Usage: ledger %s ...", args, lines[0], n)
				continue
			}
			if len(lines) < 3 || lines[1] != "" || strings.TrimSpace(lines[2]) == "" {
				t.Errorf("%v: no description after the usage line:\n%s", args, out)
			}
			flags := -1
			for i, l := range lines {
				if l == "Flags:" {
					flags = i
				}
			}
			if flags < 0 {
				continue
			}
			for i := flags + 1; i < len(lines); i += 2 {
				if !helpFlagLine.MatchString(lines[i]) {
					t.Errorf("%v: flag line %q is not in the common style", args, lines[i])
					break
				}
				if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "      ") || strings.TrimSpace(lines[i+1]) == "" {
					t.Errorf("%v: flag %q has no description line", args, lines[i])
					break
				}
			}
		}
	}
}

// TestFlagBeatsEnvironment: in every command (client and ops, one flag
// layer) an explicit flag wins over its environment variable, which wins
// over the default; exit statuses follow the documented rule (2: usage,
// or no ledger to talk to).
func TestFlagBeatsEnvironment(t *testing.T) {
	t.Setenv("LEDGER_API", "http://127.0.0.1:1")
	// The environment's API is unreachable; the flag's is another
	// unreachable one, and the error names the flag's.
	code, _, stderr := runCLI(t, "", "stats", "--api", "http://127.0.0.1:2")
	if code != exitUsage || !strings.Contains(stderr, "http://127.0.0.1:2") || strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("stats --api over LEDGER_API: %d %s", code, stderr)
	}
	// An ops command: --data over LEDGER_DATA.
	t.Setenv("LEDGER_DATA", t.TempDir())
	other := t.TempDir()
	code, _, stderr = runCLI(t, "", "export", "--data", other)
	if code != exitUsage || !strings.Contains(stderr, other) {
		t.Errorf("export --data over LEDGER_DATA (no ledger there: exit 2): %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "export", "--nats-url", "nats://127.0.0.1:1"); code != exitUsage {
		t.Errorf("export from an unreachable NATS: exit %d, want %d (%s)", code, exitUsage, stderr)
	}
	// A usage error is 2 everywhere.
	for _, args := range [][]string{{"get"}, {"export", "--no-such-flag"}, {"version", "x"}, {"list", "--limit", "many"}} {
		if code, _, stderr := runCLI(t, "", args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, stderr)
		}
	}
}
