package main

import (
	"testing"

	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestClientFindsRunningServe: one rule for every client command — --api,
// LEDGER_API, then the `ledger serve` running on --data (LEDGER_DATA), then
// the default — and the which-ledger line says which applied.
func TestClientFindsRunningServe(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_DATA", "LEDGER_QUIET", "LEDGER_TOKEN", "LEDGER_SPACE"} {
		t.Setenv(v, "")
	}
	a := apptest.Start(t) // on a free port, not 8080: found through its serve.addr.json
	dir, apiURL := a.Options().DataDir, a.HTTPURL()
	for _, cmd := range [][]string{{"stats"}, {"list"}, {"events"}} {
		code, _, stderr := runCLI(t, "", append(cmd, "--data", dir)...)
		if want := "ledger: " + apiURL + " (the ledger serve running on " + dir + ", --data)"; code != exitOK || firstLine(stderr) != want {
			t.Errorf("%v --data: %d %q, want %q", cmd, code, firstLine(stderr), want)
		}
	}
	t.Setenv("LEDGER_DATA", dir)
	if code, _, stderr := runCLI(t, "", "stats"); code != exitOK || firstLine(stderr) != "ledger: "+apiURL+" (the ledger serve running on "+dir+", LEDGER_DATA)" {
		t.Errorf("stats with LEDGER_DATA: %d %q", code, stderr)
	}
	// LEDGER_API and --api come first.
	t.Setenv("LEDGER_API", "http://127.0.0.1:1")
	if _, _, stderr := runCLI(t, "", "stats"); firstLine(stderr) != "ledger: http://127.0.0.1:1 (LEDGER_API)" {
		t.Errorf("stats with LEDGER_API and LEDGER_DATA: %q", stderr)
	}
	if _, _, stderr := runCLI(t, "", "stats", "--api", "http://127.0.0.1:2"); firstLine(stderr) != "ledger: http://127.0.0.1:2 (--api)" {
		t.Errorf("stats --api: %q", stderr)
	}
	// A directory no serve runs on: the default.
	t.Setenv("LEDGER_API", "")
	if _, _, stderr := runCLI(t, "", "stats", "--data", t.TempDir()); firstLine(stderr) != "ledger: http://127.0.0.1:8080 (default)" {
		t.Errorf("stats --data on an empty directory: %q", stderr)
	}
}
