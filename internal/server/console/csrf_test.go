package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// csrfPage is a page from another local origin that tries to write to the
// ledger in the user's browser (issue 29 item 4): a <form
// enctype=text/plain> whose one field makes the body JSON, a form-encoded
// form, no-cors fetches with a JSON body (text/plain, and an NDJSON type
// the browser drops in no-cors mode), a withdrawal, and an online rebuild.
// Each sets a flag when its answer (opaque) arrives.
const csrfPage = `<!doctype html><html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="plain" method="POST" action="LEDGER/v1/events" enctype="text/plain" target="sink1">
<input name='{"protocol":"mew/v0.4","id":"csrf-form","from":"untrusted-agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{},"x":"' value='"}}'>
</form>
<form id="urlenc" method="POST" action="LEDGER/v1/events" target="sink2">
<input name='{"protocol":"mew/v0.4","id":"csrf-urlenc","from":"untrusted-agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}' value=''>
</form>
<script>
window.forms = 0;
window.fetched = 0;
for (const s of ["sink1", "sink2"]) document.querySelector("iframe[name=" + s + "]").addEventListener("load", () => { window.forms++; });
document.getElementById("plain").submit();
document.getElementById("urlenc").submit();
const env = (id, kind, extra) => JSON.stringify(Object.assign({protocol: "mew/v0.4", id, from: "untrusted-agent", kind}, extra));
const shots = [
  fetch("LEDGER/v1/events", {method: "POST", mode: "no-cors", body: env("csrf-fetch", "mcp/proposal", {to: ["t"], payload: {method: "tools/call", params: {}}})}),
  fetch("LEDGER/v1/events", {method: "POST", mode: "no-cors", headers: {"Content-Type": "application/x-ndjson"}, body: env("csrf-ndjson", "mcp/proposal", {to: ["t"], payload: {method: "tools/call", params: {}}}) + "\n"}),
  fetch("LEDGER/v1/events", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: env("csrf-withdraw", "mcp/withdraw", {correlation_id: ["env-req-1"], payload: {reason: "csrf"}})}),
  fetch("LEDGER/v1/ops/rebuild", {method: "POST", mode: "no-cors"}),
  fetch("LEDGER/v1/events", {method: "POST", mode: "cors", headers: {"Content-Type": "application/json"}, body: env("csrf-cors", "mcp/proposal", {to: ["t"], payload: {method: "tools/call", params: {}}})}),
];
for (const p of shots) p.then(() => { window.fetched++; }, () => { window.fetched++; });
</script></body></html>`

// TestCSRFPageInBrowser: a page served from another local port, loaded in
// a real headless Chromium, tries every write a page can make without the
// API's consent; nothing is stored and no rebuild starts. The console
// beside it, from the ledger's own origin, still works in the same
// browser.
func TestCSRFPageInBrowser(t *testing.T) {
	a := apptest.Start(t)
	base := a.HTTPURL()
	seq := post(t, base, "", example(t, "golden.jsonl")...)
	waitSeq(t, a, seq)

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.ReplaceAll(csrfPage, "LEDGER", base))
	}))
	t.Cleanup(evil.Close)

	b := newBrowser(t)
	b.run("open the page of another origin", chromedp.Navigate(evil.URL+"/"))
	b.wait("every attempt answered", `window.forms >= 2 && window.fetched === 5`)

	var st struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	resp, err := http.Get(base + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.StreamSeq != seq {
		t.Fatalf("stream at %d after the page's attempts, want %d: a cross-site write was stored", st.StreamSeq, seq)
	}
	var rb struct {
		Phase string `json:"phase"`
	}
	r2, err := http.Get(base + "/v1/ops/rebuild")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	if err := json.NewDecoder(r2.Body).Decode(&rb); err != nil {
		t.Fatal(err)
	}
	if rb.Phase != "idle" {
		t.Fatalf("rebuild phase %q after the page's attempt, want idle", rb.Phase)
	}

	// The console, same browser, its own origin: the list and the live
	// stream work.
	b.open(base + "/ui/")
	var ids []string
	b.eval(`[...document.querySelectorAll("table.list tbody tr")].map(r => r.dataset.id)`, &ids)
	if strings.Join(ids, " ") != "env-req-1" {
		t.Fatalf("console list rows %q", ids)
	}
	b.wait("live", `document.getElementById("live").dataset.state === "live"`)
}
