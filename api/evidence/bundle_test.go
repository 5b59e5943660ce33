package evidence_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
)

const bundleOrigin = "test/ledger"

// makeBundle proves leaves seqs of a 40-leaf tree against a checkpoint
// signed by a fresh key; it returns the bundle's JSON and the verifier key.
func makeBundle(t testing.TB, seqs ...uint64) ([]byte, string) {
	t.Helper()
	s, _, vkey := newKey(t, bundleOrigin)
	tr := buildTree(t, 40, "a")
	cp := evidence.Checkpoint{Origin: bundleOrigin, Size: 40, Hash: tr.root(t, 40)}
	signed, err := evidence.SignCheckpoint(cp, s)
	if err != nil {
		t.Fatal(err)
	}
	var evs []evidence.EventProof
	for _, seq := range seqs {
		l := testLeaf(seq, "a")
		b, _ := l.MarshalBinary()
		p, err := tlog.ProveRecord(40, l.Index(), tr)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, evidence.NewEventProof(l, b, p))
	}
	data, err := evidence.NewBundle(signed, cp, "default", "p1", evs).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data, vkey
}

func TestVerifyBundle(t *testing.T) {
	data, vkey := makeBundle(t, 1, 2, 13, 17, 40)
	b, err := evidence.ParseBundle(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := evidence.VerifyBundle(b, vkey)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checkpoint.Size != 40 || len(got.Leaves) != 5 || got.Leaves[3].Seq != 17 {
		t.Fatalf("verified %+v", got)
	}
	if b.Events[2].RawB64 == nil || b.Events[2].Raw != nil || b.Events[1].Raw == nil {
		t.Fatal("bytes that are not UTF-8 are not in raw_b64")
	}
	// An independent check of every proof in the file.
	for _, e := range b.Events {
		leaf, _ := base64.StdEncoding.DecodeString(e.Leaf)
		ps, _ := evidence.ParseHashes(e.Proof)
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(e.LeafIndex), 40, rfc6962.DefaultHasher.HashLeaf(leaf), hashSlices(ps), got.Checkpoint.Hash[:]); err != nil {
			t.Fatalf("seq %d: transparency-dev: %v", e.Seq, err)
		}
	}
	// The file round-trips.
	again, _ := b.Marshal()
	if !bytes.Equal(again, data) {
		t.Fatal("bundle does not round-trip")
	}
}

// TestVerifyBundleTampered: one change at a time, each reported with its
// kind and the event's seq.
func TestVerifyBundleTampered(t *testing.T) {
	data, vkey := makeBundle(t, 2, 17)
	_, _, otherKey := newKey(t, bundleOrigin)
	edit := func(f func(b *evidence.Bundle)) *evidence.Bundle {
		b, err := evidence.ParseBundle(data)
		if err != nil {
			t.Fatal(err)
		}
		f(b)
		return b
	}
	leafOf := func(b *evidence.Bundle, i int) []byte {
		l, _ := base64.StdEncoding.DecodeString(b.Events[i].Leaf)
		return l
	}
	setLeaf := func(b *evidence.Bundle, i int, l []byte) {
		b.Events[i].Leaf = base64.StdEncoding.EncodeToString(l)
		b.Events[i].LeafHash = evidence.LeafHash(l).String()
	}
	for name, c := range map[string]struct {
		b    *evidence.Bundle
		key  string
		want error
		seq  string
	}{
		"other key": {edit(func(*evidence.Bundle) {}), otherKey, evidence.ErrSignature, ""},
		"bad key":   {edit(func(*evidence.Bundle) {}), "nope", evidence.ErrKey, ""},
		"checkpoint edited": {edit(func(b *evidence.Bundle) {
			b.Checkpoint = strings.Replace(b.Checkpoint, "\n40\n", "\n41\n", 1)
			b.TreeSize = 41
		}), vkey, evidence.ErrSignature, ""},
		"tree size claim": {edit(func(b *evidence.Bundle) { b.TreeSize = 39 }), vkey, evidence.ErrMismatch, ""},
		"raw edited": {edit(func(b *evidence.Bundle) {
			s := strings.Replace(*b.Events[1].Raw, "alice", "alicf", 1)
			b.Events[1].Raw = &s
		}), vkey, evidence.ErrMismatch, "seq 17"},
		"subject edited": {edit(func(b *evidence.Bundle) { b.Events[0].Subject += "x" }), vkey, evidence.ErrMismatch, "seq 2"},
		"time edited":    {edit(func(b *evidence.Bundle) { b.Events[0].Time = "2026-11-25T14:00:00Z" }), vkey, evidence.ErrMismatch, "seq 2"},
		"header edited":  {edit(func(b *evidence.Bundle) { b.Events[0].Headers["Nats-Msg-Id"] = "x" }), vkey, evidence.ErrMismatch, "seq 2"},
		"leaf_hash":      {edit(func(b *evidence.Bundle) { b.Events[0].LeafHash = b.Events[1].LeafHash }), vkey, evidence.ErrMismatch, "seq 2"},
		"leaf and raw edited": {edit(func(b *evidence.Bundle) {
			// The message and its leaf changed consistently: only the proof catches it.
			l, _ := evidence.ParseLeaf(leafOf(b, 1))
			l.Data = bytes.Replace(l.Data, []byte("alice"), []byte("alicf"), 1)
			nb, _ := l.MarshalBinary()
			setLeaf(b, 1, nb)
			s := string(l.Data)
			b.Events[1].Raw = &s
		}), vkey, evidence.ErrInclusion, "seq 17"},
		"leaf not canonical": {edit(func(b *evidence.Bundle) { setLeaf(b, 0, append(leafOf(b, 0), 0)) }), vkey, evidence.ErrLeafEncoding, "seq 2"},
		"proof edited": {edit(func(b *evidence.Bundle) {
			b.Events[0].Proof[0] = b.Events[0].Proof[1]
		}), vkey, evidence.ErrInclusion, "seq 2"},
		"moved": {edit(func(b *evidence.Bundle) {
			// The event claims another position: its leaf says seq 2.
			b.Events[0].Seq, b.Events[0].LeafIndex = 3, 2
		}), vkey, evidence.ErrMismatch, "seq 3"},
	} {
		_, err := evidence.VerifyBundle(c.b, c.key)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", name, err, c.want)
			continue
		}
		if c.seq != "" && !strings.Contains(err.Error(), c.seq+":") {
			t.Errorf("%s: %v does not name %s", name, err, c.seq)
		}
	}
	// Two bad events: both reported.
	b := edit(func(b *evidence.Bundle) { b.Events[0].Subject += "x"; b.Events[1].Proof = nil })
	_, err := evidence.VerifyBundle(b, vkey)
	if !errors.Is(err, evidence.ErrMismatch) || !errors.Is(err, evidence.ErrInclusion) {
		t.Fatalf("two failures: %v", err)
	}
}

func TestParseBundleRefuses(t *testing.T) {
	data, _ := makeBundle(t, 2, 17)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	mod := func(f func(m map[string]any)) []byte {
		var c map[string]any
		_ = json.Unmarshal(data, &c)
		f(c)
		out, _ := json.Marshal(c)
		return out
	}
	ev := func(c map[string]any, i int) map[string]any { return c["events"].([]any)[i].(map[string]any) }
	for name, in := range map[string][]byte{
		"not json":      []byte("{"),
		"trailing":      append(bytes.Clone(data), []byte("{}")...),
		"unknown field": mod(func(c map[string]any) { c["extra"] = 1 }),
		"format":        mod(func(c map[string]any) { c["format"] = "v0" }),
		"no events":     mod(func(c map[string]any) { c["events"] = []any{} }),
		"no checkpoint": mod(func(c map[string]any) { delete(c, "checkpoint") }),
		"order":         mod(func(c map[string]any) { ev(c, 1)["seq"] = 2 }),
		"seq 0":         mod(func(c map[string]any) { ev(c, 0)["seq"] = 0 }),
		"raw twice":     mod(func(c map[string]any) { ev(c, 0)["raw_b64"] = "AA==" }),
		"no raw":        mod(func(c map[string]any) { delete(ev(c, 0), "raw") }),
		"leaf b64":      mod(func(c map[string]any) { ev(c, 0)["leaf"] = "!!" }),
		"proof hash":    mod(func(c map[string]any) { ev(c, 0)["proof"] = []any{"AAAA"} }),
		"root hash":     mod(func(c map[string]any) { c["root_hash"] = "x" }),
	} {
		if _, err := evidence.ParseBundle(in); !errors.Is(err, evidence.ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
	// Issue 33: event 0 with a wrong seq is refused naming event 0, not
	// the event after it.
	_, err := evidence.ParseBundle(mod(func(c map[string]any) { ev(c, 0)["seq"] = 99 }))
	if !errors.Is(err, evidence.ErrMalformed) || !strings.Contains(err.Error(), "event 0: seq 99:") {
		t.Errorf("event 0 with a wrong seq: %v, want it named", err)
	}
	if _, err := evidence.ReadBundle(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseBundle: no input panics; a bundle that parses re-marshals and
// parses again to the same; verification never panics and fails with
// one of the package's kinds.
func FuzzParseBundle(f *testing.F) {
	data, vkey := makeBundle(f, 1, 2, 17)
	f.Add(data)
	f.Add([]byte(`{"format":"mewledger-evidence/v1"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := evidence.ParseBundle(in)
		if err != nil {
			if !errors.Is(err, evidence.ErrMalformed) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		out, err := b.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := evidence.ParseBundle(out); err != nil {
			t.Fatalf("re-marshalled bundle does not parse: %v", err)
		}
		if _, err := evidence.VerifyBundle(b, vkey); err != nil {
			for _, k := range []error{evidence.ErrMalformed, evidence.ErrSignature, evidence.ErrOrigin, evidence.ErrMismatch, evidence.ErrInclusion, evidence.ErrLeafEncoding} {
				if errors.Is(err, k) {
					return
				}
			}
			t.Fatalf("verification error of no kind: %v", err)
		}
	})
}
