package console_test

import (
	"context"
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

// Issue 38: the gap page lists the holes (window, the envelopes stored on
// either side, the recorders in gap) and marks each gap covered or not,
// with who covered it; a proposal whose lifecycle crosses a hole says so,
// one that ended before it does not. Two bridges record MEW space demo:
// a crash of one that the other recorded through is a covered gap; a
// moment both were down is the one hole, crossed by proposal p1 (created
// before, fulfilled after) and by pending f1, not by q1 (withdrawn before).
func TestConsoleHoles(t *testing.T) {
	a := apptest.Start(t)
	base := a.HTTPURL()
	ctx := context.Background()
	mark := func(b, s string) ledger.BridgeMark {
		return ledger.BridgeMark{Bridge: b, MEWSpace: "demo", Session: s, Received: time.Now()}
	}
	gap := func(b, s, lastID string, last uint64) {
		t.Helper()
		now := time.Now()
		raw, err := ledger.GapEnvelope(ledger.Gap{Bridge: b, MEWSpace: "demo", Session: s, LastEnvelope: lastID, LastSeq: last,
			DisconnectedAt: now.Add(-time.Second), ReconnectedAt: now, Reason: "killed (test)"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Appender().AppendSystem(ctx, "", raw); err != nil {
			t.Fatal(err)
		}
	}
	prop := func(id string) string {
		return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":"planner","to":["db-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"ls","arguments":{"path":"/%s"}}}}`, id, id)
	}
	withdraw := `{"protocol":"mew/v0.4","id":"q1-w","from":"planner","kind":"mcp/withdraw","correlation_id":["q1"],"payload":{"reason":"no_longer_needed"}}`
	fulfil := `{"protocol":"mew/v0.4","id":"p1-f","from":"operator","to":["db-agent"],"kind":"mcp/request","correlation_id":["p1"],"payload":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ls","arguments":{"path":"/p1"}}}}`

	postMarked(t, base, prop("q1"), mark("a", "a1"))
	postMarked(t, base, withdraw, mark("b", "b1"))
	p1 := postMarked(t, base, prop("p1"), mark("a", "a1"))
	postMarked(t, base, prop("f1"), mark("b", "b1"))
	gap("a", "a1", "p1", p1) // a was killed, b recorded through: covered
	postMarked(t, base, prop("f2"), mark("a", "a2"))
	f3 := postMarked(t, base, prop("f3"), mark("b", "b1"))
	f4 := postMarked(t, base, prop("f4"), mark("a", "a2"))
	gap("a", "a2", "f4", f4) // both down: the hole
	gap("b", "b1", "f3", f3)
	after := postMarked(t, base, fulfil, mark("a", "a3"))
	last := postMarked(t, base, prop("f5"), mark("b", "b2"))
	waitSeq(t, a, last)

	// What the API says, for the browser to show.
	var hs api.Holes
	getJSON(t, base+"/v1/holes", &hs)
	if len(hs.Holes) != 1 || hs.Holes[0].After == nil || hs.Holes[0].After.Seq != f4 || hs.Holes[0].Before == nil || hs.Holes[0].Before.Seq != after {
		t.Fatalf("holes: %+v", hs.Holes)
	}

	b := newBrowser(t)
	b.open(base + "/ui/gaps")
	if got := b.text("#holes-summary"); !strings.Contains(got, "1 hole") {
		t.Fatalf("holes summary %q", got)
	}
	row := `#holes tbody tr[data-hole="0"]`
	if got := b.text(row + " .h-after"); !strings.Contains(got, fmt.Sprintf("seq %d f4", f4)) {
		t.Fatalf("stored before the hole: %q", got)
	}
	if got := b.text(row + " .h-before"); !strings.Contains(got, fmt.Sprintf("seq %d p1-f", after)) {
		t.Fatalf("stored after the hole: %q", got)
	}
	if got := b.text(row + " .h-recorders"); got != "a, b" {
		t.Fatalf("recorders in gap: %q", got)
	}
	var covered []string
	b.eval(`[...document.querySelectorAll("table.gaps tbody tr")].map((r) => r.querySelector(".g-covered").textContent)`, &covered)
	if len(covered) != 3 || covered[0] != "✔ covered by b" || covered[1] != "✖ not covered (part of a hole)" || covered[2] != "✖ not covered (part of a hole)" {
		t.Fatalf("covered column: %q", covered)
	}
	b.shot("console-holes")

	// The proposal pages.
	crosses := func(id string) (string, string) {
		t.Helper()
		b.open(base + "/ui/proposals/" + id)
		b.wait("holes checked", `(document.querySelector("#hole-crossing") || {dataset: {}}).dataset.checked === "yes"`)
		var n string
		b.eval(`document.querySelector("#hole-crossing").dataset.crosses`, &n)
		return n, b.text("#hole-crossing")
	}
	n, text := crosses("p1")
	if n != "1" || !strings.Contains(text, "crosses a recording hole") || !strings.Contains(text, fmt.Sprintf("from seq %d to seq %d", p1, after)) ||
		!strings.Contains(text, fmt.Sprintf("after seq %d f4", f4)) || !strings.Contains(text, "recorders in gap: a, b") {
		t.Fatalf("p1 (%s): %q", n, text)
	}
	var hidden bool
	b.eval(`document.querySelector("#hole-crossing").hidden`, &hidden)
	if hidden {
		t.Fatal("p1's hole note is hidden")
	}
	b.shot("console-proposal-hole")
	if n, text := crosses("f1"); n != "1" || !strings.Contains(text, "to now (it is pending") {
		t.Fatalf("pending f1 (%s): %q", n, text)
	}
	if n, text := crosses("q1"); n != "0" || text != "" {
		t.Fatalf("q1, withdrawn before the hole (%s): %q", n, text)
	}
	if n, _ := crosses("f5"); n != "0" {
		t.Fatalf("f5, created after the hole: %s", n)
	}

	// In the past: as of the seq before p1's fulfilment, the hole is
	// open and p1 pending; as of f4, before the gaps, there is none.
	if n, text := crosses(fmt.Sprintf("p1?as_of_seq=%d", after-1)); n != "1" || !strings.Contains(text, "still open") || !strings.Contains(text, "to the point shown") {
		t.Fatalf("p1 as of seq %d (%s): %q", after-1, n, text)
	}
	if n, _ := crosses(fmt.Sprintf("p1?as_of_seq=%d", f4)); n != "0" {
		t.Fatalf("p1 as of seq %d: %s", f4, n)
	}
	b.open(fmt.Sprintf("%s/ui/gaps?as_of_seq=%d", base, after-1))
	if got := b.text(`#holes tbody tr[data-hole="0"] .h-before`); !strings.Contains(got, "still open") {
		t.Fatalf("the hole as of seq %d: %q", after-1, got)
	}

	// The status page counts them.
	b.open(base + "/ui/status")
	if got := b.text("#st-gaps"); !strings.Contains(got, "3 gaps") || !strings.Contains(got, "1 covered by another recorder") || !strings.Contains(got, "1 hole") {
		t.Fatalf("status gaps line %q", got)
	}
	b.open(base + "/ui/stats")
	if got := b.text("#stats-holes"); !strings.Contains(got, "1 hole where none was recording") {
		t.Fatalf("statistics' holes %q", got)
	}
}

// postMarked POSTs one envelope with a bridge's mark and returns its seq.
func postMarked(t *testing.T, base, env string, mark ledger.BridgeMark) uint64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(env))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ledger.HeaderBridge, mark.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r api.AppendResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted || r.Seq == 0 {
		t.Fatalf("POST %s: %d %+v %v", env, resp.StatusCode, r, err)
	}
	return r.Seq
}

func getJSON(t *testing.T, u string, out any) {
	t.Helper()
	st, b := httpGet(t, u)
	if st != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, st, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
