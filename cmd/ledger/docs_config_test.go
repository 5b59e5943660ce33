package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// serveFlags returns `ledger serve --help`'s flags: "--name METAVAR" →
// its environment variable.
func serveFlags(t *testing.T) map[string]string {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", "serve", "--help")
	help := stdout + stderr
	if code != exitOK {
		t.Fatalf("serve --help: %d\n%s", code, help)
	}
	flags := map[string]string{}
	lines := strings.Split(help, "\n")
	envRe := regexp.MustCompile(`\(env (LEDGER_[A-Z0-9_]+)`)
	for i, l := range lines {
		if !strings.HasPrefix(l, "  --") {
			continue
		}
		env := ""
		if i+1 < len(lines) {
			if m := envRe.FindStringSubmatch(lines[i+1]); m != nil {
				env = m[1]
			}
		}
		flags[strings.TrimSpace(l)] = env
	}
	if len(flags) < 20 {
		t.Fatalf("serve --help lists %d flags:\n%s", len(flags), help)
	}
	return flags
}

// TestConfigurationDocListsEveryServeFlag: docs/configuration.md's table
// ("every flag of `ledger serve`") has a row for each flag `ledger serve`
// defines, with the flag's value name and environment variable, and no
// row for a flag it does not define.
func TestConfigurationDocListsEveryServeFlag(t *testing.T) {
	flags := serveFlags(t)
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	documented := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		cols := strings.Split(l, " | ")
		if !strings.HasPrefix(l, "| `--") || len(cols) < 3 {
			continue
		}
		var names, envs []string
		for _, m := range code.FindAllStringSubmatch(cols[0], -1) {
			names = append(names, strings.ReplaceAll(m[1], `\|`, "|"))
		}
		for _, m := range code.FindAllStringSubmatch(cols[1], -1) {
			envs = append(envs, m[1])
		}
		for i, n := range names {
			env := ""
			if i < len(envs) {
				env = envs[i]
			}
			documented[n] = env
		}
	}
	var missing, extra, wrongEnv []string
	for f, env := range flags {
		denv, ok := documented[f]
		switch {
		case !ok:
			missing = append(missing, f)
		case denv != env:
			wrongEnv = append(wrongEnv, f+": "+denv+", want "+env)
		}
	}
	for f := range documented {
		if _, ok := flags[f]; !ok {
			extra = append(extra, f)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	slices.Sort(wrongEnv)
	if len(missing)+len(extra)+len(wrongEnv) > 0 {
		t.Errorf("docs/configuration.md's flag table is not `ledger serve --help`'s flags:\nmissing rows: %q\nrows of no flag: %q\nwrong env: %q",
			missing, extra, wrongEnv)
	}
}
