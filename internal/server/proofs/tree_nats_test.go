package proofs_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/projections"
)

// service returns a proofs service with a fresh key over l's stream, and
// signs a checkpoint of s.
func service(t *testing.T, l *opsrig.Ledger, s *projections.Store) *proofs.Service {
	t.Helper()
	skey, _, err := evidence.GenerateKey(rand.Reader, "test/ledger")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := proofs.New(proofs.Options{SignerKey: skey, Dir: t.TempDir(), JS: l.JS, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	if _, err := svc.Checkpoint(s); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestTreeAcrossRebuildExportImport: a rebuild, a point-in-time fold and
// an export imported into a second ledger all give the live tree's hashes;
// a message changed by one byte in an export (its hash chain recomputed,
// as anyone can) and imported into a third ledger changes the tree, and
// that ledger's proof of the proposal fails against the first ledger's
// checkpoint, naming the changed message.
func TestTreeAcrossRebuildExportImport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l1 := opsrig.New(t)
	last := int64(l1.Traffic(t, 7, 300))
	s1 := l1.Fold(t, 0)
	root1, err := s1.TreeHash(last)
	if err != nil {
		t.Fatal(err)
	}
	// A second rebuild: byte for byte the same store, tree included.
	if !bytes.Equal(opsrig.Dump(t, s1), opsrig.Dump(t, l1.Fold(t, 0))) {
		t.Fatal("two rebuilds differ")
	}
	// Point in time: the tree of the first k events is the prefix's.
	k := last / 2
	sk := l1.Fold(t, uint64(k))
	rk, err := sk.TreeHash(k)
	if want, _ := s1.TreeHash(k); err != nil || rk != want || sk.TreeSize() != k {
		t.Fatalf("point-in-time tree of %d: %s (%v), live %s", k, rk, err, want)
	}

	var exp bytes.Buffer
	if _, err := archive.Export(ctx, l1.JS, &exp, archive.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	// The export carries the tree's root, and checks against the signed
	// checkpoint (below, the tampered copy does not).
	sum, err := archive.VerifyChain(bytes.NewReader(exp.Bytes()))
	if err != nil || sum.TreeRoot != root1.String() {
		t.Fatalf("export summary tree root %q (%v), the tree's %s", sum.TreeRoot, err, root1)
	}
	l2 := opsrig.New(t)
	if _, err := archive.Import(ctx, l2.JS, bytes.NewReader(exp.Bytes()), archive.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 := l2.Fold(t, 0)
	if r2, err := s2.TreeHash(last); err != nil || r2 != root1 {
		t.Fatalf("imported ledger's tree %s (%v), original %s", r2, err, root1)
	}

	// One byte of seq 4 (the proposal "chained") changed.
	tampered := rechain(t, exp.Bytes(), 4, func(raw []byte) []byte {
		return bytes.Replace(raw, []byte(`"name":"y"`), []byte(`"name":"Y"`), 1)
	})
	l3 := opsrig.New(t)
	if _, err := archive.Import(ctx, l3.JS, bytes.NewReader(tampered), archive.ImportOptions{}); err != nil {
		t.Fatalf("the re-chained file imports: %v", err)
	}
	s3 := l3.Fold(t, 0)
	if r3, _ := s3.TreeHash(last); r3 == root1 {
		t.Fatal("a changed message left the tree as it was")
	}
	svc1, svc3 := service(t, l1, s1), service(t, l3, s3)
	b1, err := svc1.ProposalProof(ctx, s1, "default", "chained", -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.VerifyBundle(b1, svc1.VerifierKey()); err != nil {
		t.Fatalf("the original's proof: %v", err)
	}
	b3, err := svc3.ProposalProof(ctx, s3, "default", "chained", -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.VerifyBundle(b3, svc3.VerifierKey()); err != nil {
		t.Fatalf("the copy's proof against its own checkpoint: %v", err)
	}
	cp1, _, err := evidence.OpenCheckpoint([]byte(b1.Checkpoint), svc1.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.VerifyCheckpoint(bytes.NewReader(exp.Bytes()), cp1); err != nil {
		t.Fatalf("the export against the signed checkpoint: %v", err)
	}
	if _, err := archive.VerifyCheckpoint(bytes.NewReader(tampered), cp1); !errors.Is(err, archive.ErrTreeMismatch) {
		t.Fatalf("the tampered export against the signed checkpoint: %v", err)
	}
	b3.Checkpoint, b3.TreeSize, b3.RootHash = b1.Checkpoint, b1.TreeSize, b1.RootHash
	_, err = evidence.VerifyBundle(b3, svc1.VerifierKey())
	if !errors.Is(err, evidence.ErrInclusion) || !strings.Contains(err.Error(), "seq 4:") {
		t.Fatalf("the copy's proof against the original's checkpoint: %v", err)
	}
	t.Logf("the tampered copy's proof: %v", err)
}

// rechain rewrites an export: fn changes the raw bytes of seq, and every
// line's hash is recomputed from there on (the chain is not a signature).
func rechain(t *testing.T, exp []byte, seq uint64, fn func([]byte) []byte) []byte {
	t.Helper()
	var out []byte
	var prev [archive.HashSize]byte
	sc := bufio.NewScanner(bytes.NewReader(exp))
	sc.Buffer(nil, archive.MaxLineBytes)
	for sc.Scan() {
		var w struct {
			Seq     uint64              `json:"seq"`
			Time    string              `json:"time"`
			Subject string              `json:"subject"`
			Headers map[string][]string `json:"headers"`
			Raw     string              `json:"raw"`
		}
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		r := &archive.Record{Seq: w.Seq, Time: w.Time, Subject: w.Subject, Headers: w.Headers, Raw: []byte(w.Raw)}
		if r.Seq == seq {
			changed := fn(r.Raw)
			if bytes.Equal(changed, r.Raw) {
				t.Fatalf("seq %d unchanged", seq)
			}
			r.Raw = changed
		}
		h := archive.ChainHash(prev, r)
		prev = h
		r.Hash = hex.EncodeToString(h[:])
		var err error
		if out, err = r.AppendJSON(out); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := archive.VerifyChain(bytes.NewReader(out)); err != nil {
		t.Fatalf("re-chained file: %v", err)
	}
	return out
}

// TestSignerRefusesFork: the signer checks each new tree head against the
// last one it signed and stops signing when the projection's tree does
// not extend it.
func TestSignerRefusesFork(t *testing.T) {
	a, b := opsrig.New(t), opsrig.New(t)
	a.Traffic(t, 1, 40)
	b.Traffic(t, 2, 60) // another history, longer
	sa, sb := a.Fold(t, 0), b.Fold(t, 0)
	skey, _, _ := evidence.GenerateKey(rand.Reader, "test/ledger")
	dir := t.TempDir()
	svc, err := proofs.New(proofs.Options{SignerKey: skey, Dir: dir, JS: a.JS})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	e, err := svc.Checkpoint(sa)
	if err != nil || e.Checkpoint.Size != sa.TreeSize() {
		t.Fatalf("first checkpoint %v: %v", e.Checkpoint, err)
	}
	if _, err := svc.Checkpoint(sb); !errors.Is(err, proofs.ErrForked) || !errors.Is(err, evidence.ErrForked) {
		t.Fatalf("signing another history: %v", err)
	}
	if svc.Problem() == nil {
		t.Fatal("no problem reported")
	}
	if l, _ := svc.Log().Latest(); l.Checkpoint.Size != e.Checkpoint.Size {
		t.Fatalf("latest checkpoint %d after the refusal", l.Checkpoint.Size)
	}
	// A key of another origin does not take over the checkpoint log.
	svc.Close()
	other, _, _ := evidence.GenerateKey(rand.Reader, "other/ledger")
	if _, err := proofs.New(proofs.Options{SignerKey: other, Dir: dir}); !errors.Is(err, proofs.ErrKeyFile) {
		t.Fatalf("another origin's key on the log: %v", err)
	}
}
