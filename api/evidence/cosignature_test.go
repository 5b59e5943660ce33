package evidence_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
)

// testWitness is a cosignature/v1 witness written from the C2SP
// specification (not with the package's code).
type testWitness struct {
	name string
	priv ed25519.PrivateKey
	hash uint32
	vkey string
}

func newTestWitness(t *testing.T, name string) *testWitness {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	typed := append([]byte{4}, pub...)
	h := sha256.Sum256(append([]byte(name+"\n"), typed...))
	w := &testWitness{name: name, priv: priv, hash: binary.BigEndian.Uint32(h[:])}
	w.vkey = fmt.Sprintf("%s+%08x+%s", name, w.hash, base64.StdEncoding.EncodeToString(typed))
	return w
}

// cosign returns the witness's signature line over a checkpoint body.
func (w *testWitness) cosign(text string, ts uint64) string {
	sig := ed25519.Sign(w.priv, fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", ts, text))
	b := binary.BigEndian.AppendUint32(nil, w.hash)
	b = binary.BigEndian.AppendUint64(b, ts)
	return "— " + w.name + " " + base64.StdEncoding.EncodeToString(append(b, sig...)) + "\n"
}

func TestWitnessQuorum(t *testing.T) {
	skey, _, err := evidence.GenerateKey(rand.Reader, "test.example/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := evidence.NewSigner(skey)
	cp := evidence.Checkpoint{Origin: "test.example/log", Size: 3, Hash: tlog.RecordHash([]byte("x"))}
	signed, err := evidence.SignCheckpoint(cp, signer)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := cp.Text()
	a, b, c := newTestWitness(t, "a.example/w"), newTestWitness(t, "b.example/w"), newTestWitness(t, "c.example/w")
	both, err := evidence.AddSignatures(signed, []byte(a.cosign(text, 1700000000)+b.cosign(text, 1700000001)))
	if err != nil {
		t.Fatal(err)
	}
	// The same key again is not added twice.
	if again, err := evidence.AddSignatures(both, []byte(a.cosign(text, 1700000002))); err != nil || string(again) != string(both) {
		t.Fatalf("a second cosignature of a: %v\n%s", err, again)
	}
	ws, err := evidence.ParseWitnesses([]string{a.vkey, b.vkey}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ws.Check(both); err != nil || strings.Join(got, ",") != "a.example/w,b.example/w" {
		t.Fatalf("both cosigned: %q %v", got, err)
	}
	if _, err := ws.Check(signed); !errors.Is(err, evidence.ErrNoQuorum) {
		t.Fatalf("no cosignature: %v", err)
	}
	// A key that never cosigned.
	wc, _ := evidence.ParseWitnesses([]string{c.vkey}, 1)
	if _, err := wc.Check(both); !errors.Is(err, evidence.ErrNoQuorum) {
		t.Fatalf("c never cosigned: %v", err)
	}
	// A quorum of 2 of three with only a's.
	onlyA, _ := evidence.AddSignatures(signed, []byte(a.cosign(text, 1)))
	w3, _ := evidence.ParseWitnesses([]string{a.vkey, b.vkey, c.vkey}, 2)
	if _, err := w3.Check(onlyA); !errors.Is(err, evidence.ErrNoQuorum) {
		t.Fatalf("1 of a quorum of 2: %v", err)
	}
	if got, err := w3.Check(both); err != nil || len(got) != 2 {
		t.Fatalf("2 of a quorum of 2: %q %v", got, err)
	}
	// A cosignature of another checkpoint (same key) does not count.
	other := cp
	other.Size = 4
	otherText, _ := other.Text()
	forged, _ := evidence.AddSignatures(signed, []byte(a.cosign(otherText, 1)))
	wa, _ := evidence.ParseWitnesses([]string{a.vkey}, 0)
	if _, err := wa.Check(forged); !errors.Is(err, evidence.ErrNoQuorum) {
		t.Fatalf("a cosignature of another checkpoint: %v", err)
	}
	// Bad keys and quorums.
	for _, bad := range []struct {
		keys []string
		q    int
	}{{[]string{"nope"}, 0}, {[]string{a.vkey, a.vkey}, 0}, {[]string{a.vkey}, 2}, {[]string{a.vkey}, -1}} {
		if _, err := evidence.ParseWitnesses(bad.keys, bad.q); !errors.Is(err, evidence.ErrKey) {
			t.Errorf("ParseWitnesses(%q, %d): %v", bad.keys, bad.q, err)
		}
	}
	if _, err := evidence.NewWitnessVerifier(strings.Replace(a.vkey, fmt.Sprintf("%08x", a.hash), "00000000", 1)); !errors.Is(err, evidence.ErrKey) {
		t.Errorf("a key hash that does not match: %v", err)
	}
}
