package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, "", "version", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct{ Module, Version, Revision, GoVersion string }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if v.Module != "github.com/mewledger/ledger" || v.Version == "" || v.Revision == "" {
		t.Fatalf("version %+v", v)
	}
	if code, out, _ := runCLI(t, "", "version"); code != exitOK || !strings.HasPrefix(out, "ledger ") {
		t.Fatalf("version table: %d %q", code, out)
	}
	if code, _, _ := runCLI(t, "", "version", "extra"); code != exitUsage {
		t.Fatalf("version extra: exit %d, want %d", code, exitUsage)
	}
}

func TestHelpHelp(t *testing.T) {
	code, out, errOut := runCLI(t, "", "help", "help")
	if code != exitOK || !strings.Contains(out, "Usage: ledger help [COMMAND]") {
		t.Fatalf("help help: %d %q %q", code, out, errOut)
	}
}

// TestCompletionBash sources the generated script in a real bash and
// completes subcommands and flags with it.
func TestCompletionBash(t *testing.T) {
	code, script, errOut := runCLI(t, "", "completion", "bash")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f := filepath.Join(t.TempDir(), "ledger.bash")
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		arr := make([]string, len(words))
		for i, w := range words {
			arr[i] = "'" + w + "'"
		}
		prog := "source " + f + "; COMP_WORDS=(" + strings.Join(arr, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _ledger; echo \"${COMPREPLY[*]}\""
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("ledger", "hi"); got != "history" {
		t.Errorf("ledger hi<TAB> = %q, want history", got)
	}
	if got := complete("ledger", "get", "--sp"); got != "--space" {
		t.Errorf("ledger get --sp<TAB> = %q, want --space", got)
	}
	if got := complete("ledger", "serve", "--nats-l"); got != "--nats-listen" {
		t.Errorf("ledger serve --nats-l<TAB> = %q, want --nats-listen", got)
	}
	// The ops commands' flags, on the same layer, complete too.
	if got := complete("ledger", "import", "--fi"); got != "--file" {
		t.Errorf("ledger import --fi<TAB> = %q, want --file", got)
	}
	if got := complete("ledger", "verify", "--he"); got != "--head --help" {
		t.Errorf("ledger verify --he<TAB> = %q, want --head --help", got)
	}
	if got := complete("ledger", "help", "verif"); got != "verify" {
		t.Errorf("ledger help verif<TAB> = %q, want verify", got)
	}
	for _, sh := range []string{"zsh", "fish"} {
		code, out, errOut := runCLI(t, "", "completion", sh)
		if code != exitOK || !strings.Contains(out, "nats-listen") || !strings.Contains(out, "history") {
			t.Errorf("completion %s: %d %q", sh, code, errOut)
		}
	}
	if code, _, _ := runCLI(t, "", "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh: exit %d, want %d", code, exitUsage)
	}
}
