package ledger_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/mewledger/ledger/ledger"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, ledger.MarkKeySize) }

// TestMarkSeal: a seal verifies for its subject, mark and bytes only,
// under the key that made it; after a rotation (a new first key) old
// seals still verify and new ones use the new key; a nil MarkKeys seals
// and verifies nothing.
func TestMarkSeal(t *testing.T) {
	old, err := ledger.NewMarkKeys(key(1))
	if err != nil {
		t.Fatal(err)
	}
	subj, mark, raw := "ledger.s.k.proposal.alice", "b=rb&m=demo&s=s1", []byte(`{"id":"p1"}`)
	seal := old.Seal(subj, mark, raw)
	if !strings.HasPrefix(seal, old.SealingKeyID()+".") || !old.Verify(subj, mark, raw, seal) {
		t.Fatalf("seal %q does not verify", seal)
	}
	for name, c := range map[string][3]string{
		"other subject": {"ledger.s.k.proposal.mallory", mark, string(raw)},
		"other mark":    {subj, "b=rb&m=demo&s=forged", string(raw)},
		"other bytes":   {subj, mark, `{"id":"p2"}`},
	} {
		if old.Verify(c[0], c[1], []byte(c[2]), seal) {
			t.Errorf("%s: the seal verifies", name)
		}
	}
	for _, bad := range []string{"", "x", old.SealingKeyID() + ".AAAA", "00000000." + strings.SplitN(seal, ".", 2)[1]} {
		if old.Verify(subj, mark, raw, bad) {
			t.Errorf("seal %q verifies", bad)
		}
	}
	other, _ := ledger.NewMarkKeys(key(2))
	if other.Verify(subj, mark, raw, seal) {
		t.Error("another key verifies the seal")
	}
	rotated, err := ledger.ParseMarkKeys("# new first\n" + hex.EncodeToString(key(2)) + "\n\n" + hex.EncodeToString(key(1)) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !rotated.Verify(subj, mark, raw, seal) {
		t.Error("the old key's seal does not verify after the rotation")
	}
	if s := rotated.Seal(subj, mark, raw); !strings.HasPrefix(s, other.SealingKeyID()+".") || old.Verify(subj, mark, raw, s) {
		t.Errorf("after the rotation the seal %q is not the new key's", s)
	}
	var none *ledger.MarkKeys
	if none.Seal(subj, mark, raw) != "" || none.Verify(subj, mark, raw, seal) {
		t.Error("a nil MarkKeys seals or verifies")
	}
	for _, text := range []string{"", "# only a comment\n", "zz\n", hex.EncodeToString(key(1))[:10]} {
		if _, err := ledger.ParseMarkKeys(text); !errors.Is(err, ledger.ErrMarkKey) {
			t.Errorf("ParseMarkKeys(%q): %v, want ErrMarkKey", text, err)
		}
	}
}

// BenchmarkMarkSeal: the cost of sealing (append) or verifying (fold) the
// mark of one 1 KiB envelope.
func BenchmarkMarkSeal(b *testing.B) {
	mk, _ := ledger.NewMarkKeys(key(1))
	subj, mark, raw := "ledger.s.k.proposal.alice", "b=rb&m=demo&s=s1&r=1764300000000000000&p=12345&d=3", bytes.Repeat([]byte("x"), 1024)
	seal := mk.Seal(subj, mark, raw)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if !mk.Verify(subj, mark, raw, seal) {
			b.Fatal("does not verify")
		}
	}
}
