package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// TestGetCommandHoleCrossing: `ledger get` of a pending proposal stored
// just before a hole (both bridges of its MEW space down) says its
// lifecycle crosses the hole, with the hole's window and recorders in
// gap; one created after the hole says nothing; -o json carries
// hole_crossing.
func TestGetCommandHoleCrossing(t *testing.T) {
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
	gap("b", "b1", "p2", p2)
	p4 := env("p4", "a", "a2")
	minSeq := "--min-seq=" + strconv.FormatUint(p4, 10)

	code, out, stderr := runCLI(t, "", "get", "--api="+a.HTTPURL(), minSeq, "p3")
	if code != exitOK {
		t.Fatalf("get p3: %d %s", code, stderr)
	}
	if !strings.Contains(out, fmt.Sprintf("Its lifecycle (seq %d to the log's end (pending; its last event is seq %d)) crosses 1 recording hole(s)", p3, p3)) {
		t.Fatalf("get p3 does not say it crosses the hole:\n%s", out)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "1 ") {
			row = strings.Join(strings.Fields(l), " ")
		}
	}
	if want := fmt.Sprintf("1 demo seq %d p3 seq %d p4 a, b", p3, p4); row != want {
		t.Fatalf("hole row %q, want %q:\n%s", row, want, out)
	}
	code, out, stderr = runCLI(t, "", "get", "--api="+a.HTTPURL(), minSeq, "p4")
	if code != exitOK || strings.Contains(out, "hole") {
		t.Fatalf("get p4 (created after the hole): %d %s\n%s", code, stderr, out)
	}
	code, out, stderr = runCLI(t, "", "get", "--api="+a.HTTPURL(), minSeq, "-o", "json", "p3")
	var p api.Proposal
	if code != exitOK || json.Unmarshal([]byte(out), &p) != nil || p.HoleCrossing == nil || !p.HoleCrossing.Open || len(p.HoleCrossing.Holes) != 1 {
		t.Fatalf("get -o json p3: %d %s\n%s", code, stderr, out)
	}
}
