package main

import (
	"strings"
	"testing"
)

// TestCompletionFixedValues: the scripts complete --effect, --type,
// --anomaly and --log-level with the code's own value sets.
func TestCompletionFixedValues(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, stderr := runCLI(t, "", "completion", shell)
		if code != exitOK {
			t.Fatalf("completion %s: %d %s", shell, code, stderr)
		}
		for _, want := range []string{"applied recorded duplicate late unauthorized invalid orphan ignored",
			"proposal withdraw reject fulfil response note approve expire gap ignored",
			"fulfilled_after_withdrawn", "trace debug info warn error"} {
			if shell == "fish" {
				want = strings.Fields(want)[0]
			}
			if !strings.Contains(out, want) {
				t.Errorf("completion %s lacks %q", shell, want)
			}
		}
	}
}
