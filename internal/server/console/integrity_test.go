package console_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestConsoleIntegrity (issue 24): the status page's integrity panel shows
// the latest checkpoint, its tree size and the served verifier key; the
// auditor pins the key and the panel checks the checkpoint's signature in
// the browser; a proposal page checks its inclusion proof in the browser
// (WebCrypto SHA-256 and Ed25519) and says verified. Through a proxy that
// changes one byte of the proof's answer — in the message's stated bytes,
// then in the leaf itself (its hash recomputed) — the same page says
// failed, naming what failed; a pinned key of another log fails the
// signature.
func TestConsoleIntegrity(t *testing.T) {
	a := apptest.Start(t, func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointOrigin = "console.test/ledger"
	})
	target, err := url.Parse(a.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	var mode atomic.Value
	mode.Store("")
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		m := mode.Load().(string)
		if m == "" || !strings.HasSuffix(r.Request.URL.Path, "/proof") || r.StatusCode != http.StatusOK {
			return nil
		}
		data, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		data = tamperBundle(t, data, m)
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.ContentLength = int64(len(data))
		r.Header.Set("Content-Length", strconv.Itoa(len(data)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	base := srv.URL

	seq := post(t, a.HTTPURL(), "", liveProposal, liveFulfil, liveResponse)
	waitSeq(t, a, seq)
	for deadline := time.Now().Add(time.Minute); ; {
		if e, ok := a.Proofs().Log().Latest(); ok && e.Checkpoint.Size >= int64(seq) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of %d leaves after a minute", seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
	vkey := a.Proofs().VerifierKey()
	b := newBrowser(t)

	b.open(base + "/ui/status")
	b.wait("integrity panel", `!!document.querySelector("#pin-verdict[data-verdict]")`)
	if got := b.text("#checkpoint"); !strings.HasPrefix(got, "console.test/ledger") {
		t.Fatalf("checkpoint %q", got)
	}
	if got := b.text("#cp-size"); got != "3 leaves" {
		t.Fatalf("tree size %q, want 3 leaves", got)
	}
	if got := b.text("#served-key"); got != vkey {
		t.Fatalf("served key %q, want %q", got, vkey)
	}
	if got := b.text("#integrity"); !strings.Contains(got, "compare it out of band") || !strings.Contains(got, "No key pinned") {
		t.Fatalf("integrity panel %q", got)
	}
	// The auditor pins the key they got from the operator.
	pin(b, vkey)
	b.wait("pinned key verdict", `document.querySelector("#pin-verdict").dataset.verdict === "verified"`)
	if got := b.text("#pin-verdict"); !strings.Contains(got, "valid signature of the pinned key") {
		t.Fatalf("pin verdict %q", got)
	}
	b.shot("console-status")

	proposal := base + "/ui/proposals/env-req-7"
	verdict := func(want string) (string, string) {
		t.Helper()
		b.open(proposal)
		b.wait("proof verdict", `["verified","failed","unavailable"].includes((document.querySelector("#proof-verdict") || {dataset: {}}).dataset.verdict)`)
		var v struct{ Verdict, Kind, Source string }
		b.eval(`(() => { const d = document.querySelector("#proof-verdict").dataset; return {Verdict: d.verdict, Kind: d.kind || "", Source: d.keySource || ""}; })()`, &v)
		if v.Verdict != want {
			t.Fatalf("proof verdict %q (%s), want %q", v.Verdict, b.text("#proof-verdict"), want)
		}
		return v.Kind, v.Source
	}
	if _, src := verdict("verified"); src != "pinned" {
		t.Fatalf("verified against the %q key, want the pinned one", src)
	}
	if got := b.text("#proof-verdict"); !strings.Contains(got, "console.test/ledger @ 3") || !strings.Contains(got, "3 events") {
		t.Fatalf("verdict %q", got)
	}
	b.shot("console-proposal-verified")

	mode.Store("raw")
	if kind, _ := verdict("failed"); kind != "mismatch" {
		t.Fatalf("a byte changed in the stated message: failed with %q, want mismatch", kind)
	}
	mode.Store("leaf")
	if kind, _ := verdict("failed"); kind != "inclusion" {
		t.Fatalf("a byte changed in the leaf: failed with %q, want inclusion", kind)
	}
	b.shot("console-proposal-tampered")

	mode.Store("")
	_, other, err := evidence.GenerateKey(nil, "console.test/ledger")
	if err != nil {
		t.Fatal(err)
	}
	b.open(base + "/ui/status")
	b.wait("integrity panel", `!!document.querySelector("#pin-verdict[data-verdict]")`)
	pin(b, other)
	b.wait("pinned key verdict", `document.querySelector("#pin-verdict").dataset.verdict === "failed"`)
	if got := b.text("#pin-verdict"); !strings.Contains(got, "does not verify with the pinned key (signature)") {
		t.Fatalf("another key pinned: %q", got)
	}
	if kind, _ := verdict("failed"); kind != "signature" {
		t.Fatalf("another log's key: failed with %q, want signature", kind)
	}
}

// pin types a key into the status page's pin form and submits it.
func pin(b *browser, key string) {
	b.t.Helper()
	q, _ := json.Marshal(key)
	b.eval(`document.querySelector("#pin-key").value = `+string(q), nil)
	b.run("pin "+key, chromedp.Click(chromedp.CSS("#pin-btn")))
}

// tamperBundle changes one byte of the first event's message in a proof
// answer: in "raw" mode the stated bytes only, in "leaf" mode the leaf
// too, its hash recomputed (a rewritten log).
func tamperBundle(t *testing.T, data []byte, mode string) []byte {
	b, err := evidence.ParseBundle(data)
	if err != nil {
		t.Errorf("tamper: %v", err)
		return data
	}
	e := &b.Events[0]
	raw := strings.Replace(*e.Raw, "select", "selecT", 1)
	if raw == *e.Raw {
		t.Errorf("tamper: nothing to change in %s", raw)
	}
	e.Raw = &raw
	if mode == "leaf" {
		lb, _ := base64.StdEncoding.DecodeString(e.Leaf)
		l, err := evidence.ParseLeaf(lb)
		if err != nil {
			t.Errorf("tamper: %v", err)
			return data
		}
		l.Data = []byte(raw)
		nb, err := l.MarshalBinary()
		if err != nil {
			t.Errorf("tamper: %v", err)
			return data
		}
		e.Leaf = base64.StdEncoding.EncodeToString(nb)
		e.LeafHash = evidence.LeafHash(nb).String()
	}
	out, err := b.Marshal()
	if err != nil {
		t.Errorf("tamper: %v", err)
	}
	return out
}
