package main

import (
	"strings"
	"testing"
)

// TestFlagsAfterPositionals: every command takes its flags after its
// positional arguments too ("ledger events 8 -q"): the same as before
// them, never "unexpected argument" for a flag, and "--" still ends the
// flags.
func TestFlagsAfterPositionals(t *testing.T) {
	const api = "--api=http://127.0.0.1:1" // nothing listens: the command gets as far as the network
	for _, c := range []struct {
		name  string
		after []string
	}{
		{"events", []string{"events", "8", "-q", api}},
		{"get", []string{"get", "p-1", "-o", "json", "-q", api}},
		{"history", []string{"history", "p-1", "-q", api}},
		{"proof", []string{"proof", "p-1", "-o", "-", "-q", api}},
	} {
		code, _, stderr := runCLI(t, "", c.after...)
		if strings.Contains(stderr, "unexpected argument") || !strings.Contains(stderr, "cannot reach the ledger") {
			t.Errorf("%s: flags after the positional: %d %s", c.name, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "", "stats", api, "-q", "extra"); code != exitUsage || !strings.Contains(stderr, `unexpected arguments ["extra"]`) {
		t.Errorf("stats with a positional: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "events", api, "--", "-q"); code != exitUsage || strings.Contains(stderr, "cannot reach") {
		t.Errorf("events -- -q: -q after -- is a positional: %d %s", code, stderr)
	}
}
