package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// TestConsoleHolesLive: the gap page follows the space's hole changes
// (`event: holes` of /v1/watch) without a reload: two bridges of MEW space
// demo go down together and the hole appears, still open; one comes back
// and the hole is bounded by its first envelope. The proposal list marks
// the proposals whose lifecycle crosses the hole (pending p3, stored just
// before it) and not one created after it (p4); when a --history follower
// heals the hole, the marks go live.
func TestConsoleHolesLive(t *testing.T) {
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
	postMarked(t, base, prop("p1"), mark("a", "a1"))
	p2 := postMarked(t, base, prop("p2"), mark("b", "b1"))
	p3 := postMarked(t, base, prop("p3"), mark("a", "a1"))
	waitSeq(t, a, p3)

	b := newBrowser(t)
	b.open(base + "/ui/gaps")
	if got := b.text("#no-holes"); !strings.Contains(got, "No holes") {
		t.Fatalf("before the gaps: %q", got)
	}
	b.wait("the gap page live", `document.getElementById("live").dataset.state === "live"`)
	b.eval(`window.notReloaded = true`, nil)

	// Both down: the hole opens after p3, still open.
	gap("a", "a1", "p3", p3)
	gap("b", "b1", "p2", p2)
	b.wait("the hole shown", `!!document.querySelector("#holes-summary")`)
	if got := b.text(`#holes tbody tr[data-hole="0"] .h-before`); !strings.Contains(got, "still open") {
		t.Fatalf("the open hole: %q", got)
	}
	if got := b.text(`#holes tbody tr[data-hole="0"] .h-after`); !strings.Contains(got, fmt.Sprintf("seq %d p3", p3)) {
		t.Fatalf("stored before the hole: %q", got)
	}
	if got := b.text("#holes-live"); !strings.Contains(got, "opened") || !strings.Contains(got, "1 hole now") {
		t.Fatalf("the live note: %q", got)
	}

	// a comes back: its first envelope bounds the hole.
	p4 := postMarked(t, base, prop("p4"), mark("a", "a2"))
	b.wait("the hole bounded", fmt.Sprintf(`(document.querySelector('#holes tbody tr[data-hole="0"]') || {dataset: {}}).dataset.before === "%d"`, p4))
	if got := b.text(`#holes tbody tr[data-hole="0"] .h-before`); !strings.Contains(got, fmt.Sprintf("seq %d p4", p4)) {
		t.Fatalf("stored after the hole: %q", got)
	}
	var same bool
	b.eval(`window.notReloaded === true`, &same)
	if !same {
		t.Fatal("the gap page was reloaded")
	}

	// The list marks the proposals crossing the hole.
	b.open(base + "/ui/")
	var marks map[string]string
	b.eval(`Object.fromEntries([...document.querySelectorAll("table.list tbody tr")].map((r) => [r.dataset.id, (r.querySelector(".hole-mark") || {}).textContent || ""]))`, &marks)
	if len(marks) != 4 || !strings.Contains(marks["p3"], "crosses a recording hole") || !strings.Contains(marks["p1"], "crosses a recording hole") || marks["p4"] != "" {
		t.Fatalf("the list's hole marks: %q", marks)
	}

	// A --history follower heals the hole (answered duplicate up to p3,
	// it stores what was lost): the marks go, without a reload.
	b.wait("the list live", `document.getElementById("live").dataset.state === "live"`)
	b.eval(`window.notReloaded = true`, nil)
	postMarked(t, base, prop("lost1"), ledger.BridgeMark{Bridge: "h", MEWSpace: "demo", Session: "h1", Prev: p3, Dups: 3, History: true, Received: time.Now()})
	b.wait("the marks gone", `document.querySelectorAll("table.list tbody tr .hole-mark").length === 0`)
	b.eval(`window.notReloaded === true`, &same)
	if !same {
		t.Fatal("the list was reloaded")
	}
}
