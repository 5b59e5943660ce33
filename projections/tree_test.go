package projections

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// rfcRoot is RFC 6962's Merkle Tree Hash by its definition, with
// transparency-dev's hasher: an independent root of leaves.
func rfcRoot(leaves [][]byte) []byte {
	h := rfc6962.DefaultHasher
	switch len(leaves) {
	case 0:
		return h.EmptyRoot()
	case 1:
		return h.HashLeaf(leaves[0])
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return h.HashChildren(rfcRoot(leaves[:k]), rfcRoot(leaves[k:]))
}

// withIdentity gives the events of log message ids (and one a clash), as
// stored messages have.
func withIdentity(log []fold.Event) []fold.Event {
	for i := range log {
		log[i].MsgID = fmt.Sprintf("default/e%d/digest", log[i].Seq)
		if log[i].Seq == 7 {
			log[i].ClashID, log[i].MsgIDClash = "default/e3/other", true
		}
	}
	return log
}

// TestTreeFollowsTheFold: a pipeline folding a log in runs leaves a tree
// of exactly as many leaves as the checkpoint, whose leaves are the
// events' encodings and whose roots and proofs an independent RFC 6962
// implementation accepts; a restart continues the same tree.
func TestTreeFollowsTheFold(t *testing.T) {
	log := withIdentity(mixLog(t, 700))
	leaves := make([][]byte, len(log))
	for i := range log {
		b, err := LeafOf(&log[i]).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		leaves[i] = b
	}
	s := openMemStore(t)
	for _, part := range [][]fold.Event{log[:333], log[333:]} { // a new pipeline half way: a restart
		pl, err := NewPipeline(s, PipelineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range runs(part, 0, 64) {
			if err := pl.Fold(run, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := pl.Close(); err != nil {
			t.Fatal(err)
		}
		if n := s.TreeSize(); n != int64(part[len(part)-1].Seq) {
			t.Fatalf("tree of %d leaves at checkpoint %d", n, s.AppliedSeq())
		}
	}
	for _, n := range []int64{0, 1, 2, 255, 256, 257, 333, 700} {
		root, err := s.TreeHash(n)
		if err != nil {
			t.Fatal(err)
		}
		if ind := rfcRoot(leaves[:n]); !bytes.Equal(ind, root[:]) {
			t.Fatalf("root of %d: %s, RFC 6962 says %x", n, root, ind)
		}
		for i := int64(0); i < n; i += 37 {
			p, err := tlog.ProveRecord(n, i, s)
			if err != nil {
				t.Fatal(err)
			}
			lh, err := s.LeafHash(i)
			if err != nil || lh != evidence.LeafHash(leaves[i]) {
				t.Fatalf("leaf %d: stored %s, %v", i, lh, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(i), uint64(n), lh[:], hashBytes(p), root[:]); err != nil {
				t.Fatalf("leaf %d of %d: %v", i, n, err)
			}
		}
	}
	if _, err := s.TreeHash(701); !errors.Is(err, ErrBeyondTree) {
		t.Fatalf("TreeHash past the end: %v", err)
	}
	if _, err := s.LeafHash(700); !errors.Is(err, ErrBeyondTree) {
		t.Fatalf("LeafHash past the end: %v", err)
	}
}

func hashBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// TestTreeMissing: a store at a checkpoint without its tree (made before
// the tree existed) is refused by NewPipeline with ErrNoTree.
func TestTreeMissing(t *testing.T) {
	s := openMemStore(t)
	log := mixLog(t, 5)
	b := s.NewBatch()
	for _, ev := range log {
		if _, err := fold.NewFolder().Apply(b, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(5); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPipeline(s, PipelineOptions{}); !errors.Is(err, ErrNoTree) {
		t.Fatalf("NewPipeline on a store without its tree: %v", err)
	}
	if _, err := NewPipeline(s, PipelineOptions{SkipTree: true}); err != nil {
		t.Fatal(err)
	}
}

// TestStoredEventIdentity: the header names the leaf holds are the ones
// the appender, JetStream and the importer use, and an imported message's
// leaf is the original's.
func TestStoredEventIdentity(t *testing.T) {
	if evidence.HeaderMsgID != jetstream.MsgIDHeader || evidence.HeaderMsgIDClash != ledger.HeaderMsgIDClash {
		t.Fatal("the leaf's header names drifted from the ledger's")
	}
	stored := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	orig := stored.Add(-time.Hour)
	live := StoredEvent(5, orig, "ledger.default.p.proposal.a", hdrMap{
		"Nats-Msg-Id": "default/p/d", fold.HeaderMsgIDClash: "c"}.get, []byte("{}"), 0)
	imported := StoredEvent(5, stored, "ledger.default.p.proposal.a", hdrMap{
		"Nats-Msg-Id": "import/5/h", fold.HeaderMsgIDClash: "c", ledger.HeaderOriginalMsgID: "default/p/d",
		ledger.HeaderOriginalTime: orig.Format(time.RFC3339Nano)}.get, []byte("{}"), 9)
	a, _ := LeafOf(&live).MarshalBinary()
	b, _ := LeafOf(&imported).MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatalf("imported leaf differs:\n%x\n%x", a, b)
	}
	// Above the import marker the headers are not honoured.
	forged := StoredEvent(10, stored, "ledger.default.p.proposal.a", hdrMap{
		"Nats-Msg-Id": "x", ledger.HeaderOriginalMsgID: "default/p/d"}.get, []byte("{}"), 9)
	if forged.MsgID != "x" || !forged.Time.Equal(stored) {
		t.Fatalf("forged import headers honoured: %+v", forged)
	}
}

type hdrMap map[string]string

func (m hdrMap) get(k string) string { return m[k] }
