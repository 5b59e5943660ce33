package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// firstLine is the first line of s.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestSaysWhichLedger: client and ops commands name, on stderr, the ledger
// they act on and where that choice came from (flag, environment
// variable, default); stdout stays the machine-readable output; -q and
// LEDGER_QUIET silence the line.
func TestSaysWhichLedger(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_DATA", "LEDGER_NATS_URL", "LEDGER_SPACE", "LEDGER_TOKEN", "LEDGER_QUIET"} {
		t.Setenv(v, "")
	}
	a := apptest.Start(t)
	apiURL := a.HTTPURL()
	envelope := `{"protocol":"mew/v0.4","id":"which-1","from":"alice","to":["fs"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}` + "\n"

	// A flag: stdout has exactly the results, stderr the line first.
	code, stdout, stderr := runCLI(t, envelope, "publish", "--api", apiURL)
	if code != exitOK || firstLine(stderr) != "ledger: "+apiURL+" (--api)" {
		t.Fatalf("publish --api: %d stderr %q", code, stderr)
	}
	var res struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Seq == 0 || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("publish stdout is not one result line: %q %v", stdout, err)
	}
	// The environment variable, and stdout is the API's JSON only.
	t.Setenv("LEDGER_API", apiURL)
	code, stdout, stderr = runCLI(t, "", "get", "which-1", "-o", "json", "--min-seq", "1")
	if code != exitOK || stderr != "ledger: "+apiURL+" (LEDGER_API)\n" || !json.Valid([]byte(stdout)) {
		t.Fatalf("get with LEDGER_API: %d stdout %q stderr %q", code, stdout, stderr)
	}
	// -q, --quiet and LEDGER_QUIET: nothing on stderr.
	for _, args := range [][]string{{"stats", "-q"}, {"list", "--quiet"}} {
		if code, _, stderr := runCLI(t, "", args...); code != exitOK || stderr != "" {
			t.Errorf("%v: %d stderr %q", args, code, stderr)
		}
	}
	t.Setenv("LEDGER_QUIET", "1")
	if code, _, stderr := runCLI(t, "", "history", "which-1"); code != exitOK || stderr != "" {
		t.Errorf("history with LEDGER_QUIET: %d stderr %q", code, stderr)
	}
	t.Setenv("LEDGER_QUIET", "")
	// The default API: said even when nothing answers there.
	t.Setenv("LEDGER_API", "")
	if _, _, stderr := runCLI(t, "", "stats"); firstLine(stderr) != "ledger: http://127.0.0.1:8080 (default)" {
		t.Errorf("stats without --api: stderr %q", stderr)
	}
	// Over NATS.
	if _, _, stderr := runCLI(t, "", "publish", "--nats-url", "nats://127.0.0.1:1"); firstLine(stderr) != "ledger: nats://127.0.0.1:1 (--nats-url)" {
		t.Errorf("publish --nats-url: stderr %q", stderr)
	}

	// Ops commands: online through the API, offline on a data directory.
	code, stdout, stderr = runCLI(t, "", "verify", "--api", apiURL, "--progress", "off")
	if code != exitOK || firstLine(stderr) != "ledger: "+apiURL+" (--api)" || !strings.Contains(stdout, "ok") {
		t.Errorf("verify --api: %d stdout %q stderr %q", code, stdout, stderr)
	}
	t.Setenv("LEDGER_API", apiURL)
	if code, _, stderr := runCLI(t, "", "verify", "--progress", "off"); code != exitOK || firstLine(stderr) != "ledger: "+apiURL+" (LEDGER_API)" {
		t.Errorf("verify with LEDGER_API: %d stderr %q", code, stderr)
	}
	// An explicit --data beats LEDGER_API, and the line says so (no ledger
	// in that directory: exit 2, after the line).
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "", "verify", "--data", dir, "--progress", "off"); code == exitOK || firstLine(stderr) != "ledger: "+dir+" (--data)" {
		t.Errorf("verify --data with LEDGER_API: %d stderr %q", code, stderr)
	}
	t.Setenv("LEDGER_DATA", dir)
	if code, _, stderr := runCLI(t, "", "export", "--progress", "off"); code != exitUsage || firstLine(stderr) != "ledger: "+dir+" (LEDGER_DATA)" {
		t.Errorf("export with LEDGER_DATA: %d stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "export", "-q", "--progress", "off"); code != exitUsage || strings.HasPrefix(stderr, "ledger: ") {
		t.Errorf("export -q: %d stderr %q", code, stderr)
	}
	if _, _, stderr := runCLI(t, "", "replay", "--nats-url", "nats://127.0.0.1:1"); firstLine(stderr) != "ledger: nats://127.0.0.1:1 (--nats-url)" {
		t.Errorf("replay --nats-url: stderr %q", stderr)
	}
}
