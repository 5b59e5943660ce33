package console_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/subjects"
)

// garbage is what mallory publishes straight onto a ledger subject: not
// JSON, with a newline, spaces and a non-ASCII rune that must survive byte
// for byte.
const garbage = "{\"id\":\"env-req-6\",  not json\n\ttabs é end"

// TestConsoleWorkbench (issue 25): an auditor starts from a count on the
// statistics page and reaches the bytes behind it — an event with no
// proposal, found from the statistics, its raw envelope byte for byte —
// searches the log by tool, sees stored retries apart, travels to the past
// and back, downloads what a page lists as CSV (and parses it), reads the
// status page, and does it by keyboard and on a phone.
func TestConsoleWorkbench(t *testing.T) {
	a := apptest.Start(t)
	base := a.HTTPURL()
	golden := example(t, "golden.jsonl")
	lines := append(append(append([]string{}, golden...), example(t, "withdraw.jsonl")...), example(t, "reject.jsonl")...)
	waitSeq(t, a, post(t, base, "", lines...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A retry stored again (a publisher that set no Nats-Msg-Id): the
	// fold says duplicate, and the proposal shows it apart.
	retrySubj := subjects.Event{Space: "default", Key: "env-req-1", Type: "proposal", Sender: "untrusted-agent"}.String()
	if _, err := a.JetStream().Publish(ctx, retrySubj, []byte(golden[0])); err != nil {
		t.Fatal(err)
	}
	junk := subjects.Event{Space: "default", Key: "env-req-6", Type: "proposal", Sender: "mallory"}.String()
	ack, err := a.JetStream().Publish(ctx, junk, []byte(garbage))
	if err != nil {
		t.Fatal(err)
	}
	garbageSeq := ack.Sequence
	waitSeq(t, a, garbageSeq)
	b := newBrowser(t)

	// From the statistics: the count of invalid effects links to its
	// events; the one there has no proposal.
	b.open(base + "/ui/stats")
	if got := b.text(`#h-eff-t tr[data-key="invalid"] td`); got != "1" {
		t.Fatalf("invalid count on the statistics page %q", got)
	}
	b.run("click the invalid count", chromedp.Click(chromedp.CSS(`#h-eff-t tr[data-key="invalid"] td a`)))
	b.wait("the event browser", `location.pathname === "/ui/events" && !!document.body && document.body.dataset.ready === "true"`)
	var seqs []string
	b.eval(`[...document.querySelectorAll("table.events tbody tr")].map(r => r.dataset.seq)`, &seqs)
	if len(seqs) != 1 || seqs[0] != strconv.FormatUint(garbageSeq, 10) {
		t.Fatalf("invalid events %q, want the garbage at %d", seqs, garbageSeq)
	}
	if got := b.text("table.events tbody tr"); !strings.Contains(got, "mallory") || !strings.Contains(got, "not_json") || !strings.Contains(got, "env-req-6") {
		t.Fatalf("the garbage's row %q", got)
	}

	// Its page: the stored message byte for byte, its subject and hash.
	b.run("open the event", chromedp.Click(chromedp.CSS(`table.events tbody tr td.c-seq a`)))
	b.wait("the event page", `location.pathname === "/ui/events/`+strconv.FormatUint(garbageSeq, 10)+`" && !!document.body && document.body.dataset.ready === "true"`)
	var raw string
	b.eval(`document.getElementById("raw-bytes").textContent`, &raw)
	if raw != garbage {
		t.Fatalf("raw envelope %q, want %q byte for byte", raw, garbage)
	}
	if got := b.text("#ev-subject"); got != junk {
		t.Fatalf("subject %q", got)
	}
	b.shot("console-event-raw")

	// The id it is filed under names no proposal: its page shows the
	// history anyway, with the fold's reason.
	b.open(base + "/ui/proposals/env-req-6")
	if got := b.text("#no-proposal-note"); !strings.Contains(got, "1 event is filed under that id") {
		t.Fatalf("no-proposal note %q", got)
	}
	if got := b.text("ol.timeline"); !strings.Contains(got, "invalid") || !strings.Contains(got, "not_json") || !strings.Contains(got, "mallory") {
		t.Fatalf("history of env-req-6 %q", got)
	}
	b.shot("console-proposal-orphan")

	// Stored retries apart, and the Events count says so.
	b.open(base + "/ui/proposals/env-req-1")
	if got := b.text("#p-events"); got != "4 (3 and 1 stored retry of them)" {
		t.Fatalf("events count %q", got)
	}
	var retries []string
	b.eval(`[...document.querySelectorAll("#retries ol.timeline > li")].map(li => li.dataset.seq)`, &retries)
	if len(retries) != 1 {
		t.Fatalf("retries %q", retries)
	}
	var timeline int
	b.eval(`document.querySelectorAll("section[aria-labelledby=h-hist] ol.timeline > li").length`, &timeline)
	if timeline != 3 {
		t.Fatalf("history shows %d events apart from the retry, want 3", timeline)
	}

	// Search by tool: the list shows the tool and its main argument.
	b.open(base + "/ui/events")
	b.run("search by tool",
		chromedp.SetValue(chromedp.CSS("#find-what"), "tool"),
		chromedp.SendKeys(chromedp.CSS("#find-input"), "delete_file\r"))
	b.wait("tool search", `location.search.includes("tool=delete_file") && !!document.body && document.body.dataset.ready === "true"`)
	var tools []string
	b.eval(`[...document.querySelectorAll("table.events tbody td.c-tool")].map(td => td.textContent)`, &tools)
	if len(tools) == 0 {
		t.Fatal("no event of tool delete_file")
	}
	for _, tl := range tools {
		if tl != "delete_file old.log" {
			t.Fatalf("tool cell %q", tl)
		}
	}
	b.open(base + "/ui/")
	if got := b.text(`tr[data-id="env-req-3"] .tool`); got != "write_file /etc/hosts" {
		t.Fatalf("the list's tool cell %q", got)
	}

	// Time travel: as of seq 1 env-req-1 was pending; the page says it is
	// the past, and the link goes back to now.
	b.open(base + "/ui/proposals/env-req-1")
	b.run("travel to seq 1", chromedp.SendKeys(chromedp.CSS("#asof-input"), "1\r"))
	b.wait("the past", `location.search.includes("as_of_seq=1") && !!document.body && document.body.dataset.ready === "true"`)
	if got := b.text("#p-state"); got != "pending" {
		t.Fatalf("env-req-1 as of seq 1: %q", got)
	}
	if got := b.text("#past-bar"); !strings.Contains(got, "as of seq 1") {
		t.Fatalf("past bar %q", got)
	}
	var crumb string
	b.eval(`document.querySelector(".crumbs a").getAttribute("href")`, &crumb)
	if crumb != "/ui/?as_of_seq=1" {
		t.Fatalf("links in the past do not stay there: %q", crumb)
	}
	b.shot("console-past")
	b.run("back to now", chromedp.Click(chromedp.CSS("#back-to-now")))
	b.wait("now", `!location.search.includes("as_of") && !!document.body && document.body.dataset.ready === "true"`)
	if got := b.text("#p-state"); got != "fulfilled" {
		t.Fatalf("env-req-1 now: %q", got)
	}
	var pastBar bool
	b.eval(`!!document.getElementById("past-bar")`, &pastBar)
	if pastBar {
		t.Fatal("now is marked as the past")
	}

	// Export: the event browser's page as CSV, downloaded and parsed.
	dl := t.TempDir()
	b.run("allow downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dl})
		return err
	}))
	b.open(base + "/ui/events")
	var shown int
	b.eval(`document.querySelectorAll("table.events tbody tr").length`, &shown)
	b.shot("console-events")
	b.run("download CSV", chromedp.Click(chromedp.CSS("#export-csv")))
	file := filepath.Join(dl, "events.csv")
	var data []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		if data, err = os.ReadFile(file); err == nil && len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no download at %s: %v", file, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recs, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v\n%s", err, data)
	}
	if len(recs) != shown+1 || recs[0][0] != "seq" {
		t.Fatalf("CSV has %d records for %d rows shown; header %q", len(recs), shown, recs[0])
	}
	found := false
	for _, r := range recs[1:] {
		if r[0] == strconv.FormatUint(garbageSeq, 10) {
			found = r[10] == "invalid" && r[7] == "mallory"
		}
	}
	if !found {
		t.Fatalf("the garbage is not in the CSV as invalid from mallory:\n%s", data)
	}

	// Keyboard: j focuses the first event, Enter opens it; t focuses the
	// time-travel control.
	b.run("press j", chromedp.KeyEvent("j"))
	var focused string
	b.eval(`document.activeElement.textContent`, &focused)
	if focused != "1" {
		t.Fatalf("j focused %q", focused)
	}
	b.run("press enter", chromedp.KeyEvent("\r"))
	b.wait("event page by keyboard", `location.pathname === "/ui/events/1" && !!document.body && document.body.dataset.ready === "true"`)
	b.run("press t", chromedp.KeyEvent("t"))
	b.eval(`document.activeElement.id`, &focused)
	if focused != "asof-input" {
		t.Fatalf("t focused %q", focused)
	}

	// Status: positions, the log check's verdict, the consumers, and the
	// integrity panel (TestConsoleIntegrity checks it in full).
	b.open(base + "/ui/status")
	if got := b.text("#st-logcheck"); !strings.Contains(got, "ok") {
		t.Fatalf("log check %q", got)
	}
	if got := b.text("#st-projected"); got != strconv.FormatUint(garbageSeq, 10) {
		t.Fatalf("projected %q, want %d", got, garbageSeq)
	}
	if got := b.text("table.consumers tbody"); !strings.Contains(got, "durable") {
		t.Fatalf("consumers %q", got)
	}
	if got := b.text("#integrity"); !strings.Contains(got, "Tree size") || !strings.Contains(got, "No key pinned") {
		t.Fatalf("integrity %q", got)
	}
	// The status page's screenshot is TestConsoleIntegrity's (a key pinned).

	// A phone: the event browser's rows become labelled cards.
	b.run("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	b.open(base + "/ui/events")
	var display string
	b.eval(`getComputedStyle(document.querySelector("table.events tbody tr")).display`, &display)
	if display != "block" {
		t.Fatalf("on a phone an event row is displayed %q, want block (a card)", display)
	}
	b.shot("console-events-phone")
}
