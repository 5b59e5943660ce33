package console_test

import (
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestConsoleSaysWhyNotLive: a page that follows the change stream says
// "live" once it does (the gap page too: it follows the hole changes); the
// Events and Status pages say they do not follow changes and why (reload
// them); a decided proposal's page gives the
// decision's time beside "Decided by", the time of the deciding event in
// its timeline.
func TestConsoleSaysWhyNotLive(t *testing.T) {
	a := apptest.Start(t)
	base := a.HTTPURL()
	waitSeq(t, a, post(t, base, "", example(t, "golden.jsonl")...))
	b := newBrowser(t)

	b.open(base + "/ui/")
	b.wait("the list goes live", `document.querySelector("#live").dataset.state === "live"`)
	if got := b.text("#live .live-text"); got != "live" {
		t.Errorf("list: live indicator %q", got)
	}
	for _, page := range []string{"/ui/events", "/ui/status"} {
		b.open(base + page)
		if got := b.text("#live .live-text"); !strings.HasPrefix(got, "not live: this page does not follow changes") || !strings.Contains(got, "reload") {
			t.Errorf("%s: live indicator %q, want why it is not live", page, got)
		}
	}
	// The gap page follows the hole changes (holes_live_browser_test.go).
	b.open(base + "/ui/gaps")
	b.wait("the gap page goes live", `document.querySelector("#live").dataset.state === "live"`)

	b.open(base + "/ui/proposals/env-req-1")
	b.wait("the decision's time", `!!document.querySelector("#p-decided-at time")`)
	var decided, inTimeline string
	b.eval(`document.querySelector("#p-decided-at time").getAttribute("datetime")`, &decided)
	seq := strings.TrimPrefix(strings.TrimSpace(b.text("#p-decided-at .seq")), "seq ")
	b.eval(`(document.querySelector('ol.timeline > li[data-seq="`+seq+`"] time') || {getAttribute: () => ""}).getAttribute("datetime")`, &inTimeline)
	if decided == "" || decided != inTimeline {
		t.Errorf("Decided by: at %q (seq %s), the timeline's event at %q", decided, seq, inTimeline)
	}
	if !strings.Contains(b.text("dl.facts"), "Decided by") {
		t.Errorf("facts: %q", b.text("dl.facts"))
	}
}
