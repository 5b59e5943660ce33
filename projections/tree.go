package projections

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// The Merkle tree of the log (contract §16). Every folded event is one leaf
// (client/evidence's encoding; leaf index = seq-1), and the tree's stored
// hashes (tlog.StoredHashes: about two per leaf) are written in the batch
// that commits the event's fold, under the checkpoint of that batch: the
// tree is always exactly as far as the projection, a crash neither loses
// nor doubles a leaf, and a rebuild writes the same keys byte for byte, so
// Dump, Digest and Compare (and with them `ledger verify`) cover it.
//
// Key layout: 'M' ‖ u64 stored-hash index (tlog.StoredHashIndex) → the
// 32-byte hash.
//
// The tree is computed by the Pipeline, not by the fold (package fold stays
// a pure function of the events): while folding a run it encodes each
// event's leaf and computes its stored hashes from the ones before, which
// it reads from its treeWriter's frontier (the newest hash of each level,
// written by this pipeline and perhaps not committed yet) or else from
// Pebble (committed before the pipeline started).

// The stored hashes' key tag, tagTree, is in store_keys.go with the others.

// TableTree names the stored hashes in a KeyInfo (Compare's differences).
const TableTree = "tree"

// ErrNoTree is returned when a projection that has folded events holds no
// tree for them (it was made before the tree existed, or its tree keys are
// damaged): `ledger rebuild` makes both again.
var ErrNoTree = errors.New("projections: the projection has no Merkle tree")

// ErrBeyondTree is returned for a tree size or leaf the committed tree
// does not reach (yet).
var ErrBeyondTree = errors.New("projections: beyond the tree")

func treeKey(index int64) []byte { return appendU64([]byte{tagTree}, uint64(index)) }

// LeafOf returns the Merkle tree leaf of a stored message (as the fold
// reads it): its sequence, ledger time, subject, identity headers
// (evidence.HeaderBridge = ev.Bridge, evidence.HeaderMsgID = ev.MsgID,
// evidence.HeaderMsgIDClash = ev.ClashID, each when not empty) and original bytes. The leaf's Data
// aliases ev.Raw.
func LeafOf(ev *fold.Event) *evidence.Leaf {
	l := &evidence.Leaf{Seq: ev.Seq, Time: ev.Time, Subject: ev.Subject, Data: ev.Raw}
	// In name order, as the encoding sorts them.
	if ev.Bridge != "" {
		l.Headers = append(l.Headers, evidence.Header{Name: evidence.HeaderBridge, Value: ev.Bridge})
	}
	if ev.ClashID != "" {
		l.Headers = append(l.Headers, evidence.Header{Name: evidence.HeaderMsgIDClash, Value: ev.ClashID})
	}
	if ev.MsgID != "" {
		l.Headers = append(l.Headers, evidence.Header{Name: evidence.HeaderMsgID, Value: ev.MsgID})
	}
	return l
}

// StoredEvent returns the fold's input for a stored message: its stream
// sequence, stream timestamp, subject, headers (header looks one up by
// name, "" when absent) and bytes, with importedThrough the stream's
// import marker (ledger.ImportedThrough). The time is the ledger's
// (ledger.EventTime), MsgID its identity (ledger.MsgIdentity), ClashID and
// MsgIDClash from HeaderMsgIDClash. The projector, rebuild and the proof
// routes read messages through it, so that a leaf built for a proof is
// the one the fold added to the tree.
func StoredEvent(seq uint64, stored time.Time, subject string, header func(string) string, data []byte, importedThrough uint64) fold.Event {
	var origTime, origID string
	if seq <= importedThrough {
		origTime, origID = header(ledger.HeaderOriginalTime), header(ledger.HeaderOriginalMsgID)
	}
	clash := header(fold.HeaderMsgIDClash)
	return fold.Event{Seq: seq, Time: ledger.EventTime(seq, importedThrough, origTime, stored), Subject: subject, Raw: data,
		MsgIDClash: clash != "", ClashID: clash, MsgID: ledger.MsgIdentity(seq, importedThrough, header(evidence.HeaderMsgID), origID),
		Bridge: header(ledger.HeaderBridge), BridgeSeal: header(ledger.HeaderBridgeSeal)}
}

// treeWriter computes the stored hashes of the leaves a pipeline folds.
// It belongs to the pipeline's goroutine.
type treeWriter struct {
	s    *Store
	size int64 // leaves folded: committed or in a batch
	// frontier[level] is the newest stored hash of that level this writer
	// computed (valid when set): the only hashes StoredHashes asks for
	// that may not be committed yet.
	frontier [64]struct {
		index int64
		hash  tlog.Hash
		set   bool
	}
	leaf []byte // scratch: the leaf being encoded
}

// newTreeWriter returns the writer of s's tree, which must hold the stored
// hashes of every leaf up to s.AppliedSeq() (ErrNoTree otherwise).
func newTreeWriter(s *Store) (*treeWriter, error) {
	n := int64(s.AppliedSeq())
	if n > 0 {
		if _, err := s.readTreeHash(tlog.StoredHashIndex(0, n-1)); err != nil {
			if errors.Is(err, pebble.ErrNotFound) {
				return nil, fmt.Errorf("%w: it is at seq %d but holds no leaf %d; run `ledger rebuild`", ErrNoTree, n, n-1)
			}
			return nil, err
		}
	}
	return &treeWriter{s: s, size: n}, nil
}

// ReadHashes implements tlog.HashReader for StoredHashes: from the
// frontier, else from Pebble.
func (t *treeWriter) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		level, _ := tlog.SplitStoredHashIndex(x)
		if f := &t.frontier[level]; f.set && f.index == x {
			out[i] = f.hash
			continue
		}
		h, err := t.s.readTreeHash(x)
		if err != nil {
			return nil, fmt.Errorf("projections: tree: read hash %d: %w", x, err)
		}
		out[i] = h
	}
	return out, nil
}

// add appends ev's leaf to the tree: its stored hashes go into b, to be
// committed with the fold of ev. ev.Seq must be the next leaf's.
func (t *treeWriter) add(b *Batch, ev *fold.Event) error {
	if int64(ev.Seq) != t.size+1 {
		return fmt.Errorf("%w: tree: seq %d after %d leaves", ErrGap, ev.Seq, t.size)
	}
	var err error
	if t.leaf, err = LeafOf(ev).AppendBinary(t.leaf[:0]); err != nil {
		return fmt.Errorf("projections: tree: seq %d: %w", ev.Seq, err)
	}
	hs, err := tlog.StoredHashes(t.size, t.leaf, t)
	if err != nil {
		return fmt.Errorf("projections: tree: seq %d: %w", ev.Seq, err)
	}
	base := tlog.StoredHashIndex(0, t.size)
	if len(b.tree) == 0 {
		b.treeFrom = base
	} else if b.treeFrom+int64(len(b.tree)) != base {
		return fmt.Errorf("projections: tree: seq %d: hashes not contiguous in the batch", ev.Seq)
	}
	for i, h := range hs {
		x := base + int64(i)
		level, _ := tlog.SplitStoredHashIndex(x)
		t.frontier[level].index, t.frontier[level].hash, t.frontier[level].set = x, h, true
	}
	b.tree = append(b.tree, hs...)
	t.size++
	return nil
}

// collectTree appends the batch's stored hashes to ops, encoded into c.
func (b *Batch) collectTree(c *commitBuf, ops []kv) []kv {
	for i := range b.tree {
		ks := len(c.a.b)
		c.a.b = appendU64(append(c.a.b, tagTree), uint64(b.treeFrom+int64(i)))
		vs := len(c.a.b)
		c.a.b = append(c.a.b, b.tree[i][:]...)
		ops = append(ops, kv{key: c.a.b[ks:vs:vs], val: c.a.take(vs)})
	}
	return ops
}

// readTreeHash reads one stored hash (pebble.ErrNotFound, wrapped, when
// absent).
func (s *Store) readTreeHash(index int64) (tlog.Hash, error) {
	if err := s.acquire(); err != nil {
		return tlog.Hash{}, err
	}
	defer s.release()
	v, closer, err := s.db.Get(treeKey(index))
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("projections: tree hash %d: %w", index, err)
	}
	defer closer.Close()
	var h tlog.Hash
	if len(v) != len(h) {
		return h, fmt.Errorf("projections: tree hash %d: %d bytes", index, len(v))
	}
	copy(h[:], v)
	return h, nil
}

// TreeSize returns the number of leaves of the committed tree: the
// store's checkpoint (AppliedSeq), whose batch wrote them.
func (s *Store) TreeSize() int64 { return int64(s.AppliedSeq()) }

// ReadHashes implements tlog.HashReader over the committed tree: it reads
// stored hashes from Pebble. A hash of a leaf beyond TreeSize is not there
// (an error wrapping pebble.ErrNotFound). Stored hashes never change once
// written, so proofs for any size up to TreeSize are consistent without a
// snapshot. Safe for concurrent use.
func (s *Store) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		v, closer, err := s.db.Get(treeKey(x))
		if err != nil {
			return nil, fmt.Errorf("projections: tree hash %d: %w", x, err)
		}
		if len(v) != len(out[i]) {
			closer.Close()
			return nil, fmt.Errorf("projections: tree hash %d: %d bytes", x, len(v))
		}
		copy(out[i][:], v)
		closer.Close()
	}
	return out, nil
}

// TreeHash returns the root hash of the tree's first n leaves (n ≤
// TreeSize; the empty tree's hash for 0).
func (s *Store) TreeHash(n int64) (tlog.Hash, error) {
	if n < 0 || n > s.TreeSize() {
		return tlog.Hash{}, fmt.Errorf("projections: tree of %d leaves: %w (the tree has %d)", n, ErrBeyondTree, s.TreeSize())
	}
	h, err := tlog.TreeHash(n, s)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("projections: tree hash of %d leaves: %w", n, err)
	}
	return h, nil
}

// LeafHash returns the stored hash of leaf index (its leaf hash).
func (s *Store) LeafHash(index int64) (tlog.Hash, error) {
	if index < 0 || index >= s.TreeSize() {
		return tlog.Hash{}, fmt.Errorf("projections: leaf %d: %w (the tree has %d)", index, ErrBeyondTree, s.TreeSize())
	}
	return s.readTreeHash(tlog.StoredHashIndex(0, index))
}
