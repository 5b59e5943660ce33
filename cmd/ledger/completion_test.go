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
	for _, c := range completionValueCases {
		if got := complete(c.words...); got != c.want {
			t.Errorf("%s<TAB> = %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
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

// completionValueCases are completed the same by every shell's script:
// flag values, the shells, at's query and its flags.
var completionValueCases = []struct {
	words []string
	want  string
}{
	{[]string{"ledger", "--vers"}, "--version"},
	{[]string{"ledger", "list", "--state", "p"}, "pending"},
	{[]string{"ledger", "list", "--state", "w"}, "withdrawn"},
	{[]string{"ledger", "watch", "--state", "e"}, "expired"},
	{[]string{"ledger", "get", "-o", "j"}, "json"},
	{[]string{"ledger", "stats", "--output", "t"}, "table"},
	{[]string{"ledger", "serve", "--log-format", "c"}, "console"},
	{[]string{"ledger", "completion", "z"}, "zsh"},
	{[]string{"ledger", "completion", "f"}, "fish"},
	{[]string{"ledger", "at", "--seq", "5", "l"}, "list"},
	{[]string{"ledger", "at", "--seq", "5", "h"}, "history"},
	{[]string{"ledger", "at", "--seq", "5", "list", "--pro"}, "--proposer"},
	{[]string{"ledger", "at", "--seq", "5", "list", "--state", "f"}, "fulfilled"},
	{[]string{"ledger", "get", "--time"}, "--timeout"},
}

// completionScript writes `ledger completion SHELL` to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, script, errOut := runCLI(t, "", "completion", shell)
	if code != exitOK {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errOut)
	}
	f := filepath.Join(t.TempDir(), "ledger."+shell)
	if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// shell returns the path of a shell the completion tests run (make test
// and .ci/run install zsh and fish when missing).
func shell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (apt-get install -y zsh fish; make test does it): %v", name, err)
	}
	return p
}

// TestCompletionFish loads the generated script in a real fish and asks it
// to complete command lines (complete -C), as the shell does on TAB.
func TestCompletionFish(t *testing.T) {
	fish := shell(t, "fish")
	f := completionScript(t, "fish")
	complete := func(words ...string) string {
		t.Helper()
		line := strings.Join(words, " ")
		out, err := exec.Command(fish, "--no-config", "-c", "source "+f+"; complete -C '"+line+"'").CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v: %s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return strings.Join(got, " ")
	}
	if got := complete("ledger", "hist"); got != "history" {
		t.Errorf("ledger hist<TAB> = %q, want history", got)
	}
	if got := complete("ledger", "serve", "--nats-l"); got != "--nats-listen" {
		t.Errorf("ledger serve --nats-l<TAB> = %q, want --nats-listen", got)
	}
	for _, c := range completionValueCases {
		if got := complete(c.words...); got != c.want {
			t.Errorf("%s<TAB> = %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}

// zshStubs stand in for the completion system's builtins around the
// generated function, in a real zsh: compadd prints the candidates that
// match $PREFIX, _describe those of its array, _files says files.
const zshStubs = `
compdef() { :; }
compadd() { [[ $1 == -- ]] && shift; local w; for w in "$@"; do [[ $w == ${PREFIX}* ]] && print -r -- $w; done; }
_describe() { local w; for w in "${(@P)2}"; do w=${w%%:*}; [[ $w == ${PREFIX}* ]] && print -r -- $w; done; }
_files() { print -r -- '<files>'; }
`

// TestCompletionZsh runs the generated function in a real zsh with the
// words, CURRENT and PREFIX the completion system would set.
func TestCompletionZsh(t *testing.T) {
	zsh := shell(t, "zsh")
	f := completionScript(t, "zsh")
	complete := func(words ...string) string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := zshStubs + "source " + f + "\nwords=(" + strings.Join(quoted, " ") + ")\nCURRENT=" + strconv.Itoa(len(words)) +
			"\nPREFIX='" + words[len(words)-1] + "'\n_ledger | sort | tr '\\n' ' '"
		out, err := exec.Command(zsh, "-f", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("ledger", "hist"); got != "history" {
		t.Errorf("ledger hist<TAB> = %q, want history", got)
	}
	if got := complete("ledger", "verify", "--he"); got != "--head --help" {
		t.Errorf("ledger verify --he<TAB> = %q, want --head --help", got)
	}
	if got := complete("ledger", "import", "x"); got != "<files>" {
		t.Errorf("ledger import x<TAB> = %q, want files", got)
	}
	for _, c := range completionValueCases {
		if got := complete(c.words...); got != c.want {
			t.Errorf("%s<TAB> = %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}
