package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestMain lets the test binary be `ledger` for the shells the completion
// tests run (LEDGER_TEST_AS_LEDGER=1, called through a link named ledger).
func TestMain(m *testing.M) {
	if os.Getenv("LEDGER_TEST_AS_LEDGER") == "1" {
		os.Exit(run(context.Background(), env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestCompletionProposalIDs: get, history and proof complete a proposal id
// with the ids the running ledger holds (ledger list --ids), in bash, zsh
// and fish.
func TestCompletionProposalIDs(t *testing.T) {
	a := apptest.Start(t)
	for _, id := range []string{"ids-alpha", "ids-beta"} {
		env := `{"protocol":"mew/v0.4","id":"` + id + `","from":"alice","to":["fs"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}` + "\n"
		if code, _, stderr := runCLI(t, env, "publish", "--api", a.HTTPURL(), "-q"); code != exitOK {
			t.Fatalf("publish: %d %s", code, stderr)
		}
	}
	if code, out, stderr := runCLI(t, "", "list", "--ids", "--api", a.HTTPURL(), "-q", "--min-seq", "2"); code != exitOK || out != "ids-beta\nids-alpha\n" {
		t.Fatalf("list --ids: %d %q %s", code, out, stderr)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(self, filepath.Join(bin, "ledger")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("LEDGER_TEST_AS_LEDGER", "1")
	t.Setenv("LEDGER_API", a.HTTPURL())

	words := []string{"ledger", "get", "ids-"}
	bashProg := "source " + completionScript(t, "bash") + "; COMP_WORDS=('" + strings.Join(words, "' '") + "'); COMP_CWORD=" +
		strconv.Itoa(len(words)-1) + "; _ledger; echo \"${COMPREPLY[*]}\""
	zshProg := "autoload -U compinit; compinit -u 2>/dev/null; source " + completionScript(t, "zsh") +
		"; compadd() { shift; print -l -- \"$@\" }; words=(ledger get ids-); CURRENT=3; PREFIX=ids-; _ledger"
	fishProg := "source " + completionScript(t, "fish") + "; complete -C 'ledger get ids-'"
	for _, c := range []struct{ shell, prog string }{{"bash", bashProg}, {shell(t, "zsh"), zshProg}, {shell(t, "fish"), fishProg}} {
		args := []string{"-c", c.prog}
		if strings.HasSuffix(c.shell, "fish") {
			args = append([]string{"--no-config"}, args...)
		}
		out, err := exec.Command(c.shell, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", c.shell, err, out)
		}
		if !strings.Contains(string(out), "ids-alpha") || !strings.Contains(string(out), "ids-beta") {
			t.Errorf("%s: ledger get ids-<TAB> = %q, want both ids", filepath.Base(c.shell), out)
		}
	}
}
