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
