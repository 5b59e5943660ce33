package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// The browser tests drive a real headless Chromium against a real ledger
// (embedded NATS, Pebble, the HTTP API and the console from this binary).
// A missing browser fails them: the console is only tested in a browser.
//
// Screenshots go to the test's temporary directory; with
// LEDGER_SCREENSHOTS=DIR they are also written there (docs/ for the README:
// LEDGER_SCREENSHOTS=$PWD/docs go test -run TestConsole ./internal/server/console).

// chromium returns the browser's path.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	t.Fatal("no chromium on PATH: the console's browser tests need it (apt-get install chromium; .ci/run installs it)")
	return ""
}

// browser is one headless Chromium tab; JavaScript errors and failed
// console calls fail the test.
type browser struct {
	t      *testing.T
	ctx    context.Context
	shots  string
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	base, cancelTimeout := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, shots: t.TempDir()}
	t.Cleanup(func() { cancelCtx(); cancelAlloc(); cancelTimeout() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = fmt.Sprintf("%s %s:%d", e.ExceptionDetails.Text, e.ExceptionDetails.URL, e.ExceptionDetails.LineNumber+1)
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, a.Description+fmt.Sprint(a.Value))
			}
			msg = "console.error: " + strings.Join(parts, " ")
		default:
			return
		}
		b.mu.Lock()
		b.errors = append(b.errors, msg)
		b.mu.Unlock()
	})
	if err != nil {
		t.Fatalf("listen to chromium: %v", err)
	}
	return b
}

func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	b.checkErrors()
}

func (b *browser) checkErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Fatalf("JavaScript errors in the console: %q", b.errors)
	}
}

// open loads a console page and waits until its script has rendered it.
func (b *browser) open(url string) {
	b.t.Helper()
	start := time.Now()
	b.run("open "+url, chromedp.Navigate(url))
	b.wait("page rendered: "+url, `!!document.body && document.body.dataset.ready === "true"`)
	b.t.Logf("opened %s in %v", url, time.Since(start))
}

// wait evaluates expr until it is true (bounded by the test's deadline,
// which fails the test: no assertion depends on how long it takes).
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			b.t.Fatalf("waiting for %s: %v", what, err)
		}
		b.checkErrors()
		if ok {
			return
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("waiting for %s: %v", what, b.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	b.checkErrors()
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("evaluate %s: %v in %s", expr, err, raw)
		}
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel), &s)
	return strings.Join(strings.Fields(s), " ")
}

// shot saves a full-page screenshot as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	for _, dir := range []string{b.shots, os.Getenv("LEDGER_SCREENSHOTS")} {
		if dir == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// post appends envelopes (one a line) and returns the last sequence.
func post(t *testing.T, base, token string, lines ...string) uint64 {
	t.Helper()
	return postTo(t, base+"/v1/events", token, lines...)
}

func postSpace(t *testing.T, base, space string, lines ...string) uint64 {
	t.Helper()
	return postTo(t, base+"/v1/events?space="+space, "", lines...)
}

func postTo(t *testing.T, url, token string, lines ...string) uint64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST: %d %s", resp.StatusCode, buf.String())
	}
	var last uint64
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r struct {
			Seq   uint64 `json:"seq"`
			Error any    `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Error != nil {
			t.Fatalf("POST answer %q", l)
		}
		last = max(last, r.Seq)
	}
	return last
}

func example(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func waitSeq(t *testing.T, a *app.App, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Store().WaitApplied(ctx, seq); err != nil {
		t.Fatal(err)
	}
}

const (
	liveProposal = `{"protocol":"mew/v0.4","id":"env-req-7","from":"planner","to":["db-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"run_query","arguments":{"sql":"select count(*) from orders"}}}}`
	liveFulfil   = `{"protocol":"mew/v0.4","id":"env-fulfill-7","from":"human-user","to":["db-agent"],"kind":"mcp/request","correlation_id":["env-req-7"],"payload":{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_query","arguments":{"sql":"select count(*) from orders"}}}}`
	liveResponse = `{"protocol":"mew/v0.4","id":"env-resp-7","from":"db-agent","to":["human-user"],"kind":"mcp/response","correlation_id":["env-fulfill-7"],"payload":{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"42"}]}}}`
	// A fulfilment of the withdrawn env-req-2: what an auditor hunts for.
	lateFulfil = `{"protocol":"mew/v0.4","id":"env-fulfill-2","from":"cleanup-bot","to":["target-agent"],"kind":"mcp/request","correlation_id":["env-req-2"],"payload":{"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"old.log"}}}}`
	// A chain that arrives backwards.
	orphanChat     = `{"protocol":"mew/v0.4","id":"chat-9","from":"policy-agent","kind":"chat","correlation_id":["reject-9"],"payload":{"text":"no writes to prod"}}`
	orphanReject   = `{"protocol":"mew/v0.4","id":"reject-9","from":"policy-agent","kind":"mcp/reject","correlation_id":["env-req-9"],"payload":{"reason":"policy"}}`
	orphanProposal = `{"protocol":"mew/v0.4","id":"env-req-9","from":"planner","to":["db-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"migrate","arguments":{"db":"prod"}}}}`
	pending8       = `{"protocol":"mew/v0.4","id":"env-req-8","from":"planner","kind":"mcp/proposal","payload":{"method":"tools/list","params":{}}}`
	fulfil8        = `{"protocol":"mew/v0.4","id":"env-fulfill-8","from":"planner","kind":"mcp/request","correlation_id":["env-req-8"],"payload":{"method":"tools/list","params":{}}}`
)

// TestConsole publishes the README walkthrough's golden sequence, its
// withdrawal and rejection with explanations, a fulfilment after the
// withdrawal and a pending proposal; opens the list, the proposal pages,
// the statistics and the gaps in Chromium and checks what the DOM shows;
// then watches a pending proposal turn fulfilled live, on its page and in
// the list.
func TestConsole(t *testing.T) {
	a := apptest.Start(t)
	base := a.HTTPURL()
	lines := append(append(append(example(t, "golden.jsonl"), example(t, "withdraw.jsonl")...), example(t, "reject.jsonl")...), lateFulfil, liveProposal, pending8)
	waitSeq(t, a, post(t, base, "", lines...))
	gap, err := ledger.GapEnvelope(ledger.Gap{Bridge: "recorder", MEWSpace: "team-a", Gateway: "ws://gw:8080",
		LastEnvelope: "env-req-3", DisconnectedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ReconnectedAt: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Appender().AppendSystem(context.Background(), "default", gap); err != nil {
		t.Fatal(err)
	}
	orphanSeq := postSpace(t, base, "audit-b", orphanChat, orphanReject) // the reject's
	waitSeq(t, a, postSpace(t, base, "audit-b", orphanProposal))
	b := newBrowser(t)

	// The list: every proposal, newest first, its state in words, counts.
	b.open(base + "/ui/")
	var ids []string
	b.eval(`[...document.querySelectorAll("table.list tbody tr")].map(r => r.dataset.id)`, &ids)
	if strings.Join(ids, " ") != "env-req-8 env-req-7 env-req-3 env-req-2 env-req-1" {
		t.Fatalf("list rows %q", ids)
	}
	for id, state := range map[string]string{"env-req-1": "fulfilled", "env-req-2": "withdrawn", "env-req-3": "rejected", "env-req-7": "pending"} {
		if got := b.text(fmt.Sprintf(`tr[data-id=%q] .c-state`, id)); !strings.HasSuffix(got, " "+state) {
			t.Fatalf("row %s state %q, want %s", id, got, state)
		}
	}
	if got := b.text(`tr[data-id="env-req-2"] .c-anom`); !strings.Contains(got, "fulfilled after withdrawn") {
		t.Fatalf("env-req-2 anomalies %q", got)
	}
	if got := b.text("#count-all"); got != "5" {
		t.Fatalf("count of all %q", got)
	}
	if got := b.text("#count-pending"); got != "2" {
		t.Fatalf("count of pending %q", got)
	}
	b.wait("live", `document.getElementById("live").dataset.state === "live"`)
	b.shot("console-list")

	// Filters: state=rejected leaves one row; the form keeps the filter.
	b.open(base + "/ui/?state=rejected")
	b.eval(`[...document.querySelectorAll("table.list tbody tr")].map(r => r.dataset.id)`, &ids)
	if strings.Join(ids, " ") != "env-req-3" {
		t.Fatalf("state=rejected rows %q", ids)
	}
	// Cursor paging: limit 2 pages through all five.
	b.open(base + "/ui/?limit=2")
	var all []string
	for page := 0; ; page++ {
		b.eval(`[...document.querySelectorAll("table.list tbody tr")].map(r => r.dataset.id)`, &ids)
		all = append(all, ids...)
		var next string
		b.eval(`(document.getElementById("next-page") || {}).href || ""`, &next)
		if next == "" || page > 5 {
			break
		}
		b.open(next)
	}
	if strings.Join(all, " ") != "env-req-8 env-req-7 env-req-3 env-req-2 env-req-1" {
		t.Fatalf("paged rows %q", all)
	}

	// The rejection: state, reason, the explanation chat, the timeline
	// with its links between chained events.
	b.open(base + "/ui/proposals/env-req-3")
	if got := b.text("#p-state"); got != "rejected" {
		t.Fatalf("env-req-3 state %q", got)
	}
	if got := b.text(".card.rej"); !strings.Contains(got, "Rejected by fs-agent") || !strings.Contains(got, "reason unsafe") ||
		!strings.Contains(got, "writing outside the sandbox is not allowed") {
		t.Fatalf("rejection card %q", got)
	}
	var timeline []string
	b.eval(`[...document.querySelectorAll("ol.timeline > li")].map(li => li.querySelector(".ev-type").textContent + " " + li.querySelector(".ev-id").textContent + " " + li.querySelector(".effect").textContent)`, &timeline)
	if strings.Join(timeline, "; ") != "proposal env-req-3 applied; reject reject-3 applied; note chat-3 applied" {
		t.Fatalf("timeline %q", timeline)
	}
	var link string
	b.eval(`(document.querySelector("#ev-chat-3 a.evlink") || {}).getAttribute?.("href") || ""`, &link)
	if link != "#ev-reject-3" {
		t.Fatalf("the note does not link its rejection: %q", link)
	}
	b.shot("console-proposal-rejected")

	// Another space, where a chain arrived backwards (chat → reject →
	// proposal): the timeline says which events were orphans, resolved
	// when the proposal arrived.
	b.open(base + "/ui/proposals/env-req-9?space=audit-b")
	if got := b.text("#p-state"); got != "rejected" {
		t.Fatalf("env-req-9 state %q", got)
	}
	if got := b.text("#ev-reject-9 .orphan-note"); got != fmt.Sprintf("Arrived as an orphan at seq %d; applied when seq %d arrived.", orphanSeq, orphanSeq+1) {
		t.Fatalf("orphan note %q", got)
	}
	if got := b.text(".card.rej blockquote"); got != "no writes to prod" {
		t.Fatalf("explanation of the orphaned rejection %q", got)
	}
	var navSpace string
	b.eval(`document.querySelector('a[data-nav="list"]').getAttribute("href")`, &navSpace)
	if navSpace != "/ui/?space=audit-b" {
		t.Fatalf("the nav does not keep the space: %q", navSpace)
	}

	// The withdrawn proposal fulfilled anyway: the anomaly in words.
	b.open(base + "/ui/proposals/env-req-2")
	if got := b.text(".anomalies"); !strings.Contains(got, "fulfilled after withdrawn") || !strings.Contains(got, "operation ran anyway") {
		t.Fatalf("anomalies %q", got)
	}
	if got := b.text(".card.wd"); !strings.Contains(got, "the log was rotated already") {
		t.Fatalf("withdrawal card %q", got)
	}
	if got := b.text("#ev-env-fulfill-2 .effect"); got != "late" {
		t.Fatalf("late fulfilment's effect %q", got)
	}
	b.shot("console-proposal-anomaly")

	// Live: the pending env-req-7 turns fulfilled, and its outcome shows.
	b.open(base + "/ui/proposals/env-req-7")
	if got := b.text("#p-state"); got != "pending" {
		t.Fatalf("env-req-7 state %q", got)
	}
	b.wait("live", `document.getElementById("live").dataset.state === "live"`)
	post(t, base, "", liveFulfil, liveResponse)
	b.wait("env-req-7 fulfilled live", `(document.getElementById("p-state") || {}).textContent === "fulfilled"`)
	b.wait("the outcome live", `[...document.querySelectorAll(".card.ful .outcome")].some(e => e.textContent === "succeeded")`)
	if got := b.text(".card.ful"); !strings.Contains(got, "Fulfilled by human-user") || !strings.Contains(got, "env-resp-7") {
		t.Fatalf("fulfilment card %q", got)
	}
	b.shot("console-proposal-fulfilled")

	// Live in the list: env-req-8's row turns fulfilled (self-fulfilled).
	b.open(base + "/ui/")
	b.wait("live", `document.getElementById("live").dataset.state === "live"`)
	post(t, base, "", fulfil8)
	b.wait("env-req-8's row fulfilled live", `document.querySelector('tr[data-id="env-req-8"] .c-state').textContent.includes("fulfilled")`)
	if got := b.text(`tr[data-id="env-req-8"] .c-anom`); !strings.Contains(got, "self fulfilled") {
		t.Fatalf("env-req-8 anomalies after the live update %q", got)
	}
	b.wait("pending count updated", `document.getElementById("count-pending").textContent === "0"`)

	// Statistics: counts by state and anomaly, and the charts over time.
	b.open(base + "/ui/stats")
	b.wait("charts over time", `document.querySelectorAll("svg.chart.time").length === 2`)
	var bars string
	b.eval(`document.querySelector("svg.chart.bar").getAttribute("aria-label")`, &bars)
	if bars != "Proposals by state: pending 0, fulfilled 3, withdrawn 1, rejected 1, expired 0" {
		t.Fatalf("state chart %q", bars)
	}
	b.shot("console-stats")

	// Gaps: the bridge's gap, with where the record may be incomplete.
	b.open(base + "/ui/gaps")
	if got := b.text("table.gaps tbody"); !strings.Contains(got, "recorder") || !strings.Contains(got, "env-req-3") || !strings.Contains(got, "2026-01-02 03:04:05Z") {
		t.Fatalf("gaps table %q", got)
	}
	b.shot("console-gaps")
	b.open(base + "/ui/gaps?space=audit-b")
	if got := b.text("#no-gaps"); got != "No gaps recorded." {
		t.Fatalf("gaps of audit-b %q", got)
	}

	// A phone: the list's rows become labelled cards.
	b.run("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	b.open(base + "/ui/")
	var display string
	b.eval(`getComputedStyle(document.querySelector("table.list tbody tr")).display`, &display)
	if display != "block" {
		t.Fatalf("on a phone a row is displayed %q, want block (a card)", display)
	}
	b.shot("console-phone")

	// Keyboard: j focuses the first proposal link, Enter opens it.
	b.run("reset viewport", chromedp.EmulateViewport(1280, 900))
	b.open(base + "/ui/")
	b.run("press j", chromedp.KeyEvent("j"))
	var focused string
	b.eval(`document.activeElement.textContent`, &focused)
	if focused != "env-req-8" {
		t.Fatalf("j focused %q", focused)
	}
	b.run("press enter", chromedp.KeyEvent("\r"))
	b.wait("proposal page by keyboard", `location.pathname === "/ui/proposals/env-req-8" && !!document.body && document.body.dataset.ready === "true"`)
}

// TestConsoleWithAuth: with API tokens the console's files load without
// one, the page asks for the token once, keeps it for the tab, and reads
// and watches with it; a token without the auditor role is refused.
func TestConsoleWithAuth(t *testing.T) {
	const auditor, writer = "audit-secret-1", "writer-secret-1"
	g, err := httpauth.New(httpauth.Config{Tokens: []httpauth.Token{
		{Name: "audit", SHA256: httpauth.HashToken(auditor), Roles: []httpauth.Role{httpauth.RoleAuditor}},
		{Name: "ci", SHA256: httpauth.HashToken(writer), Roles: []httpauth.Role{httpauth.RoleWriter}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.HTTPMiddleware = func(h http.Handler) (http.Handler, error) { return g.Protect(g.Rules(), h) }
	})
	base := a.HTTPURL()
	waitSeq(t, a, post(t, base, writer, liveProposal))
	if resp, err := http.Get(base + "/v1/proposals"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the API without a token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	b := newBrowser(t)
	b.run("open the proposal", chromedp.Navigate(base+"/ui/proposals/env-req-7?space=default"))
	b.wait("token dialog", `document.getElementById("token-dialog").open`)
	b.run("give the token",
		chromedp.SendKeys(chromedp.CSS("#token-input"), auditor),
		chromedp.Click(chromedp.CSS("#token-form button")))
	b.wait("proposal with the token", `(document.getElementById("p-state") || {}).textContent === "pending"`)
	b.wait("live with the token", `document.getElementById("live").dataset.state === "live"`)
	post(t, base, writer, liveFulfil)
	b.wait("fulfilled live through the token", `(document.getElementById("p-state") || {}).textContent === "fulfilled"`)
	// Kept for the tab: another page does not ask again.
	b.open(base + "/ui/?space=default")
	var open bool
	b.eval(`document.getElementById("token-dialog").open`, &open)
	if open {
		t.Fatal("the console asked for the token again")
	}
	var ids []string
	b.eval(`[...document.querySelectorAll("table.list tbody tr")].map(r => r.dataset.id)`, &ids)
	if len(ids) != 1 || ids[0] != "env-req-7" {
		t.Fatalf("rows %q", ids)
	}
	// A writer's token is not an auditor's: the page says so.
	b.eval(fmt.Sprintf(`sessionStorage.setItem("mewledger.token", %q), true`, writer), nil)
	b.open(base + "/ui/")
	if got := b.text(".error"); !strings.Contains(got, "403") || !strings.Contains(got, "auditor role") {
		t.Fatalf("with a writer's token: %q", got)
	}
}
