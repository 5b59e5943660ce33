package main

import (
	"strings"
	"testing"
)

// TestDidYouMean: a mistyped command or flag is answered with the nearest
// one; a word far from all is not.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lsit"}, `ledger: no command "lsit" (did you mean list?)`},
		{[]string{"help", "statz"}, `ledger: no command "statz" (did you mean stats?)`},
		{[]string{"frobnicate"}, `ledger: no command "frobnicate"` + "\n"},
		{[]string{"get", "--outptu", "json", "x"}, "ledger get: unknown flag --outptu (did you mean --output?)"},
		{[]string{"events", "--efect", "applied"}, "ledger events: unknown flag --efect (did you mean --effect?)"},
		{[]string{"list", "--zzzzzz"}, "ledger list: unknown flag --zzzzzz\n"},
	} {
		code, _, stderr := runCLI(t, "", c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: %d %q, want %q", c.args, code, stderr, c.want)
		}
	}
}

// TestErrorsInTheCLIsWords: no Go package prefix in what the CLI prints,
// and a value named once.
func TestErrorsInTheCLIsWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "--api", "::bad", "x"}, `ledger get: invalid options: API "::bad" is not an http(s) URL such as http://127.0.0.1:8080` + "\n"},
		{[]string{"get", "--timeout", "soon", "x"}, `ledger get: --timeout "soon": want a duration such as 30s` + "\n"},
	} {
		code, _, stderr := runCLI(t, "", c.args...)
		if code != exitUsage || !strings.HasPrefix(stderr, c.want) {
			t.Errorf("%v: %d %q, want %q", c.args, code, stderr, c.want)
		}
	}
	for in, want := range map[string]string{
		"client: invalid options: API x":           "API x",
		"the list from X: client: refused: reason": "the list from X: refused: reason",
		`--timeout "soon": time: invalid duration`: `--timeout "soon": invalid duration`,
		"ledger: no such thing":                    "ledger: no such thing",
	} {
		if got := userMessage(in); got != want {
			t.Errorf("userMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
