package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// TestWatchCommandHoles: `ledger watch` prints a hole opening (two
// bridges of a MEW space down together) and its bounding (one comes
// back) as one line each, between the proposals' changes.
func TestWatchCommandHoles(t *testing.T) {
	a := apptest.Start(t)
	post := func(path string, body []byte, mark *ledger.BridgeMark) uint64 {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, a.HTTPURL()+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if mark != nil {
			req.Header.Set(ledger.HeaderBridge, mark.String())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r api.AppendResult
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted || r.Seq == 0 {
			t.Fatalf("POST %s: %d %+v %v", path, resp.StatusCode, r, err)
		}
		return r.Seq
	}
	env := func(id string, b, s string) uint64 {
		m := ledger.BridgeMark{Bridge: b, MEWSpace: "demo", Session: s}
		return post("/v1/events", fmt.Appendf(nil, `{"protocol":"mew/v0.4","id":%q,"from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`, id), &m)
	}
	gap := func(b, s, last string, lastSeq uint64) uint64 {
		now := time.Now().UTC()
		g := ledger.Gap{Bridge: b, MEWSpace: "demo", Session: s, LastEnvelope: last, LastSeq: lastSeq,
			DisconnectedAt: now.Add(-time.Second), ReconnectedAt: now, Reason: "test"}
		body, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		return post("/v1/gaps", body, nil)
	}
	env("p1", "a", "a1")
	p2 := env("p2", "b", "b1")
	p3 := env("p3", "a", "a1")
	gap("a", "a1", "p3", p3)
	open := gap("b", "b1", "p2", p2)
	back := env("p4", "a", "a2")
	code, out, stderr := runCLI(t, "", "watch", "--api="+a.HTTPURL(), "--since-seq", "0", "--count", "6")
	if code != exitOK {
		t.Fatalf("watch: %d %s", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 7 {
		t.Fatalf("watch printed %d lines:\n%s", len(rows), out)
	}
	for _, w := range []string{
		fmt.Sprintf("%-8d %-20s %-24s opened p3..open [a,b]; healed -; 1 hole(s) now", open, "-", "holes demo"),
		fmt.Sprintf("%-8d %-20s %-24s opened -; healed p4..open [a,b]; 1 hole(s) now", back, "-", "holes demo"),
	} {
		if !strings.Contains(out, w+"\n") {
			t.Fatalf("watch output lacks %q:\n%s", w, out)
		}
	}
}
