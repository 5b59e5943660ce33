package witness_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/internal/testkit/witnesskit"
)

const origin = "test.example/ledger"

func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	code, _, body := apitest.GetRaw(t, url)
	return code, body
}

func post(t testing.TB, base, env string) uint64 {
	t.Helper()
	return apitest.PostEnvelope(t, base, env)
}

func appendN(t testing.TB, base, prefix string, n int) uint64 {
	var last uint64
	for i := range n {
		last = post(t, base, opsrig.Env(fmt.Sprintf("%s-%d", prefix, i), "alice", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`))
	}
	return last
}

func status(t testing.TB, base string) api.Status { t.Helper(); return apitest.StatusOf(t, base) }

// waitFor polls cond until it holds, failing after 60s with what it said.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s, not %s: %s", what, why)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// checkpointSize returns the size of GET /v1/checkpoint[?unwitnessed=1]
// (-1 on 503) and its note.
func checkpointSize(t testing.TB, base string, unwitnessed bool) (int64, []byte) {
	t.Helper()
	u := base + "/v1/checkpoint"
	if unwitnessed {
		u += "?unwitnessed=1"
	}
	st, b := get(t, u)
	if st == http.StatusServiceUnavailable {
		return -1, nil
	}
	cp, err := evidence.ParseUnverified(b)
	if st != 200 || err != nil {
		t.Fatalf("GET %s: %d %s", u, st, b)
	}
	return cp.Size, b
}

// TestLitewitness: a ledger asking two real litewitness instances with a
// quorum of 2. Its checkpoints get both cosignatures (checked by this
// repository's verifier and by torchwood's); with one witness stopped,
// signed checkpoints keep being made while the witnessed one stops
// advancing and the status says why; when it returns, everything catches
// up. A fork (the same key signing another, longer history) is refused by
// both witnesses and raises the alarm: /readyz 503, log_problem naming the
// witness and the sizes.
func TestLitewitness(t *testing.T) {
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
	var ws []witness.Witness
	for _, w := range []*witnesskit.Witness{w1, w2} {
		p, err := witness.Parse(w.Flag())
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, p)
	}
	withWitnesses := func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointKeyFile = keyFile
		o.Witnesses = ws
		o.WitnessQuorum = 2
		o.WitnessBackoff = 50 * time.Millisecond
	}
	a := apptest.Start(t, withWitnesses)
	base := a.HTTPURL()
	required, err := evidence.ParseWitnesses([]string{w1.VKey, w2.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	logV, err := evidence.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}

	// Both cosign.
	last := appendN(t, base, "a", 5)
	var signed []byte
	waitFor(t, "witnessed to the last append", func() (bool, string) {
		var n int64
		n, signed = checkpointSize(t, base, false)
		return n >= int64(last), fmt.Sprintf("witnessed size %d, want %d; %+v", n, last, status(t, base).Witnessing)
	})
	if _, _, err := evidence.OpenCheckpoint(signed, logV); err != nil {
		t.Fatal(err)
	}
	if got, err := required.Check(signed); err != nil || len(got) != 2 {
		t.Fatalf("cosigners %q: %v\n%s", got, err, signed)
	}
	// Independently: torchwood's cosignature/v1 verifiers with x/mod's
	// note.Open.
	n, err := note.Open(signed, note.VerifierList(logV, w1.Signer.Verifier(), w2.Signer.Verifier()))
	if err != nil || len(n.Sigs) != 3 {
		t.Fatalf("note.Open with torchwood's verifiers: %v (%d signatures verified)\n%s", err, len(n.Sigs), signed)
	}

	// Verifiers: a proposal's bundle carries the cosignatures; it verifies
	// with the witnesses' keys, and is refused with a key that never
	// cosigned and with a quorum that is not met.
	st, body := get(t, base+"/v1/proposals/a-4/proof")
	bundle, err := evidence.ParseBundle(body)
	if st != 200 || err != nil {
		t.Fatalf("proof: %d %v %s", st, err, body)
	}
	ver, err := evidence.VerifyBundleWitnessed(bundle, vkey, required)
	if err != nil || len(ver.Cosigners) != 2 {
		t.Fatalf("bundle with both witnesses' keys: %v", err)
	}
	stranger := witnesskit.NewKey(t, "witness.example/stranger")
	for _, c := range []struct {
		keys   []string
		quorum int
	}{{[]string{stranger}, 0}, {[]string{w1.VKey, w2.VKey, stranger}, 3}, {[]string{w1.VKey, stranger}, 2}} {
		ws, err := evidence.ParseWitnesses(c.keys, c.quorum)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := evidence.VerifyBundleWitnessed(bundle, vkey, ws); !errors.Is(err, evidence.ErrNoQuorum) {
			t.Fatalf("bundle with witnesses %q quorum %d: %v, want ErrNoQuorum", c.keys, c.quorum, err)
		}
	}
	// The Go client, WithWitnesses.
	cl, err := client.New(base, client.WithVerifier(vkey, ""), client.WithWitnesses([]string{w1.VKey, w2.VKey}, 2))
	if err != nil {
		t.Fatal(err)
	}
	if vp, err := cl.VerifiedGet(context.Background(), "a-4"); err != nil || len(vp.Cosigners) != 2 {
		t.Fatalf("VerifiedGet with the witnesses: %v", err)
	}
	cl, _ = client.New(base, client.WithVerifier(vkey, ""), client.WithWitnesses([]string{stranger}, 0))
	if _, err := cl.VerifiedGet(context.Background(), "a-4"); !errors.Is(err, evidence.ErrNoQuorum) {
		t.Fatalf("VerifiedGet with a witness that never cosigned: %v, want ErrNoQuorum", err)
	}

	// One witness stopped: signing goes on, the witnessed checkpoint
	// stops, the status says why.
	w2.Stop()
	witnessedBefore, _ := checkpointSize(t, base, false)
	last = appendN(t, base, "b", 5)
	waitFor(t, "signed past the witnessed checkpoint with witness two failing", func() (bool, string) {
		s := status(t, base)
		signedN, _ := checkpointSize(t, base, true)
		w := s.Witnessing
		return signedN >= int64(last) && w != nil && w.Witnesses[0].CosignedSize >= int64(last) &&
				w.Witnesses[1].Failures > 0 && w.Witnesses[1].LastError != "",
			fmt.Sprintf("signed %d (want %d), %+v", signedN, last, w)
	})
	if n, _ := checkpointSize(t, base, false); n != witnessedBefore {
		t.Fatalf("the witnessed checkpoint moved from %d to %d with one witness of a quorum of 2 down", witnessedBefore, n)
	}
	s := status(t, base)
	if s.Witnessing.WitnessedSize != witnessedBefore || s.Witnessing.Witnesses[1].CosignedSize > witnessedBefore || s.Witnessing.Witnesses[1].Alarm != "" {
		t.Fatalf("status with witness two down: %+v", s.Witnessing)
	}
	if st, b := get(t, base+"/readyz"); st != 200 {
		t.Fatalf("a witness down makes the ledger not ready: %d %s", st, b)
	}

	// It returns: everything catches up.
	w2.Restart()
	waitFor(t, "witnessed again after witness two returned", func() (bool, string) {
		n, _ := checkpointSize(t, base, false)
		return n >= int64(last), fmt.Sprintf("witnessed %d, want %d: %+v", n, last, status(t, base).Witnessing)
	})
	if s := status(t, base); s.Witnessing.Witnesses[1].LastError != "" || s.Witnessing.Witnesses[1].Failures != 0 {
		t.Fatalf("status after the return: %+v", s.Witnessing.Witnesses[1])
	}

	// A fork: another ledger with the same key and another, longer
	// history. Both witnesses refuse it.
	seen, _ := checkpointSize(t, base, false)
	b := apptest.Start(t, withWitnesses)
	appendN(t, b.HTTPURL(), "mallory", int(seen)+5)
	waitFor(t, "both witnesses refusing the fork", func() (bool, string) {
		s := status(t, b.HTTPURL())
		w := s.Witnessing
		return w != nil && w.Witnesses[0].Alarm != "" && w.Witnesses[1].Alarm != "" && s.LogProblem != "", fmt.Sprintf("%+v", w)
	})
	s = status(t, b.HTTPURL())
	if !strings.Contains(s.LogProblem, "witness.example/one") || !strings.Contains(s.LogProblem, fmt.Sprintf("from tree size %d", seen)) ||
		!strings.Contains(s.LogProblem, "422") {
		t.Fatalf("log_problem %q, want the witness, the sizes and the 422", s.LogProblem)
	}
	st, body = get(t, b.HTTPURL()+"/readyz")
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), "a witness refused the ledger's history") {
		t.Fatalf("readyz of the fork: %d %s", st, body)
	}
	if n, _ := checkpointSize(t, b.HTTPURL(), false); n != -1 {
		t.Fatalf("the fork serves a witnessed checkpoint of %d", n)
	}
	// The honest ledger is unaffected.
	if st, body := get(t, base+"/readyz"); st != 200 {
		t.Fatalf("the honest ledger: %d %s", st, body)
	}
}
