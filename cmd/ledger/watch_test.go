package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestWatchCommand: `ledger watch` prints the changes of the golden
// sequence and a rejection, in stream order, as a table and as JSON lines,
// and refuses a bad filter with the API's error.
func TestWatchCommand(t *testing.T) {
	a := apptest.Start(t)
	apiURL := "--api=" + a.HTTPURL()
	lines := strings.Join([]string{e2eProposal, e2eFulfil, e2eResponse,
		`{"protocol":"mew/v0.4","id":"env-req-3","from":"untrusted-agent","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`,
		`{"protocol":"mew/v0.4","id":"reject-3","from":"fs-agent","kind":"mcp/reject","correlation_id":["env-req-3"],"payload":{"reason":"unsafe"}}`,
	}, "\n")
	if code, _, stderr := runCLI(t, lines, "publish", apiURL); code != exitOK {
		t.Fatalf("publish: %d %s", code, stderr)
	}
	code, out, stderr := runCLI(t, "", "watch", apiURL, "--since-seq", "0", "--count", "4")
	if code != exitOK {
		t.Fatalf("watch: %d %s", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"SEQ", "1 ", "2 ", "4 ", "5 "}
	if len(rows) != len(want) {
		t.Fatalf("watch printed %d lines:\n%s", len(rows), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Fatalf("line %d %q, want it to start with %q\n%s", i, rows[i], w, out)
		}
	}
	for _, s := range []string{"env-req-1", "pending → fulfilled", "env-fulfill-1 by human-user", "pending → rejected", "reject-3 by fs-agent"} {
		if !strings.Contains(out, s) {
			t.Fatalf("watch output lacks %q:\n%s", s, out)
		}
	}
	code, out, stderr = runCLI(t, "", "watch", apiURL, "--since-seq", "2", "--proposal", "env-req-3", "--count", "2", "-o", "json")
	if code != exitOK {
		t.Fatalf("watch -o json: %d %s", code, stderr)
	}
	var seqs []uint64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var c api.Change
		if err := json.Unmarshal([]byte(l), &c); err != nil || c.ID != "env-req-3" {
			t.Fatalf("json line %q: %v", l, err)
		}
		seqs = append(seqs, c.Seq)
	}
	if len(seqs) != 2 || seqs[0] != 4 || seqs[1] != 5 {
		t.Fatalf("seqs %v, want [4 5]", seqs)
	}
	if code, _, stderr := runCLI(t, "", "watch", apiURL, "--state", "done"); code != exitFailed || !strings.Contains(stderr, "bad_query") {
		t.Fatalf("bad state: %d %s", code, stderr)
	}
	if code, _, _ := runCLI(t, "", "watch", apiURL, "--since-seq", "x"); code != exitUsage {
		t.Fatalf("bad --since-seq: %d", code)
	}
}
