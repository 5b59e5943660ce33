package evidence_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/mewledger/ledger/api/evidence"
)

// TestCheckpointRoundTrip: a signed checkpoint opens with the verifier key,
// and transparency-dev/formats/log parses the same note to the same
// origin, size and hash.
func TestCheckpointRoundTrip(t *testing.T) {
	const origin = "ledger.example.com/ledger"
	s, v, _ := newKey(t, origin)
	tr := buildTree(t, 33, "a")
	cp := evidence.Checkpoint{Origin: origin, Size: 33, Hash: tr.root(t, 33)}
	signed, err := evidence.SignCheckpoint(cp, s)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := evidence.OpenCheckpoint(signed, v)
	if err != nil {
		t.Fatal(err)
	}
	if got.Origin != cp.Origin || got.Size != cp.Size || got.Hash != cp.Hash || len(got.Extensions) != 0 {
		t.Fatalf("opened %v, signed %v", got, cp)
	}
	if len(n.Sigs) != 1 || n.Sigs[0].Name != origin {
		t.Fatalf("sigs %+v", n.Sigs)
	}
	ind, rest, _, err := log.ParseCheckpoint(signed, origin, v)
	if err != nil {
		t.Fatalf("transparency-dev/formats: %v", err)
	}
	if ind.Origin != origin || ind.Size != 33 || !bytes.Equal(ind.Hash, cp.Hash[:]) || len(rest) != 0 {
		t.Fatalf("transparency-dev parsed %+v (rest %q)", ind, rest)
	}
	if text, _ := cp.Text(); string(ind.Marshal()) != text {
		t.Fatalf("body %q, transparency-dev marshals %q", text, ind.Marshal())
	}
	if u, err := evidence.ParseUnverified(signed); err != nil || u.Size != 33 {
		t.Fatalf("ParseUnverified: %v %v", u, err)
	}
	// Extension lines survive.
	cp.Extensions = []string{"ext one"}
	signed, _ = evidence.SignCheckpoint(cp, s)
	if got, _, err := evidence.OpenCheckpoint(signed, v); err != nil || len(got.Extensions) != 1 || got.Extensions[0] != "ext one" {
		t.Fatalf("extensions: %v %v", got, err)
	}
}

// TestCosign: a second process's key signs the same tree head; the note
// verifies with either key, and formats/log sees both signatures.
func TestCosign(t *testing.T) {
	const origin = "shared/ledger"
	s1, v1, _ := newKey(t, origin)
	s2, v2, _ := newKey(t, origin)
	cp := evidence.Checkpoint{Origin: origin, Size: 3, Hash: buildTree(t, 3, "a").root(t, 3)}
	signed, _ := evidence.SignCheckpoint(cp, s1)
	both, err := evidence.Cosign(signed, v1, s2)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []note.Verifier{v1, v2} {
		if _, _, err := evidence.OpenCheckpoint(both, v); err != nil {
			t.Fatalf("verifier %s+%08x: %v", v.Name(), v.KeyHash(), err)
		}
	}
	_, _, n, err := log.ParseCheckpoint(both, origin, v1, v2)
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("transparency-dev: %v, %+v", err, n)
	}
}

func TestVerifierKeyOf(t *testing.T) {
	skey, vkey, err := evidence.GenerateKey(rand.Reader, "host/ledger")
	if err != nil {
		t.Fatal(err)
	}
	got, err := evidence.VerifierKeyOf(skey + "\n")
	if err != nil || got != vkey {
		t.Fatalf("VerifierKeyOf = %q, %v; want %q", got, err, vkey)
	}
	for _, bad := range []string{"", vkey, "PRIVATE+KEY+x", strings.Replace(skey, "+", "-", 3)} {
		if _, err := evidence.VerifierKeyOf(bad); !errors.Is(err, evidence.ErrKey) {
			t.Errorf("VerifierKeyOf(%q): err %v", bad, err)
		}
	}
	if _, _, err := evidence.GenerateKey(rand.Reader, "has space"); !errors.Is(err, evidence.ErrKey) {
		t.Errorf("origin with a space: %v", err)
	}
	if _, err := evidence.NewVerifier("nonsense"); !errors.Is(err, evidence.ErrKey) {
		t.Errorf("NewVerifier: %v", err)
	}
	if _, err := evidence.NewSigner(vkey); !errors.Is(err, evidence.ErrKey) || strings.Contains(err.Error(), vkey) {
		t.Errorf("NewSigner: %v", err)
	}
}

// TestOpenCheckpointFails: each way a checkpoint can be wrong gets its
// error kind.
func TestOpenCheckpointFails(t *testing.T) {
	const origin = "a/ledger"
	s, v, _ := newKey(t, origin)
	_, otherV, _ := newKey(t, origin)
	cp := evidence.Checkpoint{Origin: origin, Size: 10, Hash: buildTree(t, 10, "a").root(t, 10)}
	signed, _ := evidence.SignCheckpoint(cp, s)

	// A key named otherwise signing a checkpoint of origin.
	sx, vx, _ := newKey(t, "b/ledger")
	foreign, _ := evidence.SignCheckpoint(cp, sx)

	tamper := func(old, new string) []byte { return []byte(strings.Replace(string(signed), old, new, 1)) }
	sigLine := string(signed[bytes.LastIndex(signed, []byte("\n\n"))+2:])
	for name, c := range map[string]struct {
		msg  []byte
		v    note.Verifier
		want error
	}{
		"size changed":  {tamper("\n10\n", "\n11\n"), v, evidence.ErrSignature},
		"other key":     {signed, otherV, evidence.ErrSignature},
		"bad signature": {tamper(sigLine[len(sigLine)-6:], "AAAAA\n"), v, evidence.ErrSignature},
		"no signature":  {tamper(sigLine, ""), v, evidence.ErrMalformed},
		"not a note":    {[]byte("hello"), v, evidence.ErrMalformed},
		"origin":        {foreign, vx, evidence.ErrOrigin},
		"bad body":      {mustSign(t, "b/ledger\nten\nAAAA\n", sx), vx, evidence.ErrMalformed},
		"control char":  {[]byte("a/ledger\n10\n\x01\n\n— a/ledger AAAA\n"), v, evidence.ErrMalformed},
	} {
		if _, _, err := evidence.OpenCheckpoint(c.msg, c.v); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", name, err, c.want)
		}
	}
}

func mustSign(t *testing.T, text string, s note.Signer) []byte {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: text}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestParseCheckpointText(t *testing.T) {
	good := "o\n5\n" + strings.Repeat("A", 43) + "=\n"
	if _, err := evidence.ParseCheckpointText(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"", "o\n5\n", "o\n05\n" + strings.Repeat("A", 43) + "=\n", "o\n-1\n" + strings.Repeat("A", 43) + "=\n",
		"o\n5\nAAAA\n", "\n5\n" + strings.Repeat("A", 43) + "=\n", good + "\n", strings.TrimSuffix(good, "\n"),
		"o\n5\n" + strings.Repeat("A", 43) + "=\nx\x7f\n", "o\n+5\n" + strings.Repeat("A", 43) + "=\n",
	} {
		if _, err := evidence.ParseCheckpointText(bad); !errors.Is(err, evidence.ErrMalformed) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

// FuzzOpenCheckpoint: no input panics; an input that opens re-marshals to
// its own body; errors are the package's kinds.
func FuzzOpenCheckpoint(f *testing.F) {
	skey, _, err := evidence.GenerateKey(bytes.NewReader(make([]byte, 64)), "fuzz/ledger")
	if err != nil {
		f.Fatal(err)
	}
	s, err := evidence.NewSigner(skey)
	if err != nil {
		f.Fatal(err)
	}
	vkey, _ := evidence.VerifierKeyOf(skey)
	v, _ := evidence.NewVerifier(vkey)
	tr := buildTree(f, 9, "f")
	for _, n := range []int64{0, 1, 9} {
		signed, _ := evidence.SignCheckpoint(evidence.Checkpoint{Origin: "fuzz/ledger", Size: n, Hash: tr.root(f, n)}, s)
		f.Add(signed)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if u, err := evidence.ParseUnverified(msg); err == nil {
			if text, err := u.Text(); err != nil || !bytes.Contains(msg, []byte(text)) {
				t.Fatalf("unverified parse does not round-trip: %v", err)
			}
		}
		cp, _, err := evidence.OpenCheckpoint(msg, v)
		if err != nil {
			if !errors.Is(err, evidence.ErrMalformed) && !errors.Is(err, evidence.ErrSignature) && !errors.Is(err, evidence.ErrOrigin) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		text, err := cp.Text()
		if err != nil || !bytes.HasPrefix(msg, []byte(text+"\n")) {
			t.Fatalf("opened checkpoint %v does not re-marshal to its body (%v)", cp, err)
		}
	})
}
