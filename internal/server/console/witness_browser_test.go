package console_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
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
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/witnesskit"
)

// Issue 34: the integrity panel shows which witnesses cosigned the
// checkpoint it checked, each cosignature verified in the browser, and the
// quorum; the status page shows each witness's state. A ledger asks two
// real litewitness instances and a third witness that is never reachable
// (listed, never cosigns), with a quorum of 2: the two are verified, the
// third is not; a cosignature changed in transit is shown not verified and
// the quorum not met; witness keys the auditor pins replace the listed
// ones; a proposal's evidence names its checkpoint's cosigners.
func TestConsoleWitnesses(t *testing.T) {
	const origin = "console.test/witnessed"
	keyFile := t.TempDir() + "/checkpoint.key"
	skey, err := proofs.GenerateKeyFile(keyFile, origin)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := evidence.VerifierKeyOf(skey)
	if err != nil {
		t.Fatal(err)
	}
	w1 := witnesskit.Start(t, "witness.example/one", origin, vkey)
	w2 := witnesskit.Start(t, "witness.example/two", origin, vkey)
	absent := witnesskit.NewKey(t, "witness.example/absent")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	_ = dead.Close() // nothing listens there: every request fails
	var ws []witness.Witness
	for _, f := range []string{w1.Flag(), w2.Flag(), absent + " " + deadURL} {
		p, err := witness.Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, p)
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointKeyFile = keyFile
		o.Witnesses = ws
		o.WitnessQuorum = 2
		o.WitnessBackoff = 50 * time.Millisecond
	})

	// A proxy that can change one byte of witness two's cosignature in
	// the checkpoint served.
	target, err := url.Parse(a.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	var tamper atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if !tamper.Load() || r.Request.URL.Path != "/v1/checkpoint" || r.StatusCode != http.StatusOK {
			return nil
		}
		data, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		data = tamperCosignature(t, data, w2.Name)
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
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st, body := httpGet(t, a.HTTPURL()+"/v1/checkpoint")
		if st == http.StatusOK {
			if cp, err := evidence.ParseUnverified(body); err == nil && cp.Size >= int64(seq) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no witnessed checkpoint of %d leaves after two minutes: %d %s", seq, st, body)
		}
	}

	b := newBrowser(t)
	b.open(base + "/ui/status")
	b.wait("the cosigners", `!!document.querySelector("#witness-verdict[data-verdict]")`)
	verified := func() map[string]string {
		var m map[string]string
		b.eval(`Object.fromEntries([...document.querySelectorAll("#cosigners tbody tr")].map((r) => [r.dataset.witness, r.dataset.verified]))`, &m)
		return m
	}
	want := map[string]string{w1.Name: "yes", w2.Name: "yes", "witness.example/absent": "no"}
	if got := verified(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cosigners %v, want %v", got, want)
	}
	if got := b.text("#witness-verdict"); !strings.Contains(got, "2 of the 3 witnesses this ledger lists cosigned it") || !strings.Contains(got, "quorum 2: met") {
		t.Fatalf("witness verdict %q", got)
	}
	if got := b.text(`#cosigners tr[data-witness="witness.example/absent"]`); !strings.Contains(got, "not verified: the checkpoint carries no cosignature of this witness") {
		t.Fatalf("the absent witness: %q", got)
	}
	// The status page: each witness's state.
	if got := b.text(`#witnesses-status tr[data-witness="witness.example/one"] .w-size`); got == "none yet" || got == "" {
		t.Fatalf("witness one's last cosigned size %q", got)
	}
	if got := b.text(`#witnesses-status tr[data-witness="witness.example/absent"] .w-error`); got == "none" || !strings.Contains(got, "failure") {
		t.Fatalf("the absent witness's last error %q", got)
	}
	if got := b.text("#wit-summary"); !strings.Contains(got, "Quorum 2 of 3") {
		t.Fatalf("witness summary %q", got)
	}
	b.shot("console-witnesses")

	// A proposal's evidence names its checkpoint's cosigners.
	b.open(base + "/ui/proposals/env-req-7")
	b.wait("the proof's cosigners", `(document.querySelector("#proof-witnesses") || {dataset: {}}).dataset.verdict === "verified"`)
	if got := b.text("#proof-witnesses"); !strings.Contains(got, "witness.example/one ✔") || !strings.Contains(got, "witness.example/absent ✖") {
		t.Fatalf("proof witnesses %q", got)
	}

	// Witness two's cosignature changed in transit: not verified, and the
	// quorum is not met.
	tamper.Store(true)
	b.open(base + "/ui/status")
	b.wait("the cosigners", `!!document.querySelector("#witness-verdict[data-verdict]")`)
	if got := b.text(`#cosigners tr[data-witness="witness.example/two"]`); !strings.Contains(got, "not verified: its cosignature does not verify") {
		t.Fatalf("a changed cosignature: %q", got)
	}
	var v string
	b.eval(`document.querySelector("#witness-verdict").dataset.verdict`, &v)
	if got := b.text("#witness-verdict"); v != "failed" || !strings.Contains(got, "quorum 2: not met") {
		t.Fatalf("verdict with a changed cosignature: %s %q", v, got)
	}
	b.shot("console-witnesses-tampered")
	tamper.Store(false)

	// Pinned keys replace the listed ones: witness one and a stranger,
	// quorum 2, is not met; witness one alone, quorum 1, is.
	pinWitnessKeys(b, []string{w1.VKey, witnesskit.NewKey(t, "witness.example/stranger")}, 2)
	b.wait("pinned verdict", `document.querySelector("#witness-verdict").dataset.source === "pinned" && document.querySelector("#witness-verdict").dataset.verdict === "failed"`)
	pinWitnessKeys(b, []string{w1.VKey}, 1)
	b.wait("pinned verdict", `document.querySelector("#witness-verdict").dataset.verdict === "verified" && document.querySelector("#witness-verdict").dataset.verified === "1"`)
	if got := b.text("#witness-verdict"); !strings.Contains(got, "you pinned") {
		t.Fatalf("pinned verdict %q", got)
	}
	b.run("forget the pinned witnesses", chromedp.Click(chromedp.CSS("#unpin-witnesses-btn")))

	// A ledger whose only witness never answers: no checkpoint holds the
	// quorum; the panel says so and checks the latest signed one.
	lone, err := witness.Parse(absent + " " + deadURL)
	if err != nil {
		t.Fatal(err)
	}
	c := apptest.Start(t, func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.Witnesses = []witness.Witness{lone}
		o.WitnessBackoff = 50 * time.Millisecond
	})
	seq = post(t, c.HTTPURL(), "", liveProposal)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st, body := httpGet(t, c.HTTPURL()+"/v1/checkpoint?unwitnessed=1")
		if cp, err := evidence.ParseUnverified(body); st == http.StatusOK && err == nil && cp.Size >= int64(seq) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no signed checkpoint of %d leaves after a minute: %d %s", seq, st, body)
		}
	}
	b.open(c.HTTPURL() + "/ui/status")
	b.wait("the cosigners", `!!document.querySelector("#witness-verdict[data-verdict]")`)
	if got := b.text("#not-witnessed"); !strings.Contains(got, "No checkpoint holds the witnesses' quorum yet") {
		t.Fatalf("not witnessed: %q", got)
	}
	if got := b.text("#witness-verdict"); !strings.Contains(got, "0 of the 1 witness this ledger lists cosigned it") || !strings.Contains(got, "quorum 1: not met") {
		t.Fatalf("verdict with no witnessed checkpoint: %q", got)
	}
	if got := b.text("#wit-summary"); !strings.Contains(got, "Witnessed checkpoint: size none yet") {
		t.Fatalf("summary with no witnessed checkpoint: %q", got)
	}
}

// pinWitnessKeys fills and submits the integrity panel's witness form.
func pinWitnessKeys(b *browser, keys []string, quorum int) {
	b.t.Helper()
	b.eval(fmt.Sprintf(`(() => { document.querySelector("#pin-witnesses").value = %q; document.querySelector("#pin-quorum").value = %q; document.querySelector("#pin-witnesses-btn").click(); return true; })()`,
		strings.Join(keys, "\n"), strconv.Itoa(quorum)), nil)
}

// tamperCosignature flips one bit of the named witness's signature line
// in a signed note (in the Ed25519 signature, after key hash and time).
func tamperCosignature(t *testing.T, note []byte, name string) []byte {
	lines := strings.Split(string(note), "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "— "+name+" ")
		if !ok {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(sig) < 20 {
			t.Errorf("tamper: %q", l)
			return note
		}
		sig[len(sig)-1] ^= 1
		lines[i] = "— " + name + " " + base64.StdEncoding.EncodeToString(sig)
		return []byte(strings.Join(lines, "\n"))
	}
	t.Errorf("tamper: no line of %s in %s", name, note)
	return note
}

func httpGet(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
