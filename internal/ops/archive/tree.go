package archive

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/ledger"
)

// The export and the Merkle tree (contract §16): one integrity mechanism for
// evidence. Each line of an export is one leaf of the ledger's tree, and a
// file that starts at seq 1 and is contiguous has the tree's root, which a
// signed checkpoint of the ledger names: VerifyCheckpoint checks a file
// against one, and Summary.TreeRoot (written by Export and VerifyChain) is
// the root of the whole file. The hash chain stays for what the tree does
// not do by itself: it names the first line of a file that was damaged or
// edited (the tree says only that the root differs) and it covers every
// header, not only the identity ones; but it is no evidence (anyone who
// edits a file can recompute it), the signed checkpoint is.

// ErrTreeMismatch: an export's lines are not the leaves of the tree a
// checkpoint signs.
var ErrTreeMismatch = errors.New("archive: the export is not the tree the checkpoint signs")

// LeafOf returns the Merkle-tree leaf the ledger holds for the message of
// r: its seq, its time (the ledger's), subject, identity headers (with
// the bridge session mark, ledger.HeaderBridge, as projections.LeafOf)
// and raw bytes. The identity (evidence.HeaderMsgID) is the message's first
// Nats-Msg-Id: for a line that was itself imported (its Nats-Msg-Id is an
// import's, ImportMsgIDPrefix), the one its ledger.HeaderOriginalMsgID
// keeps, as the importer writes it back (ledger.MsgIdentity).
func LeafOf(r *Record) (*evidence.Leaf, error) {
	t, err := r.ParsedTime()
	if err != nil {
		return nil, fmt.Errorf("archive: seq %d: time %q: %w", r.Seq, r.Time, err)
	}
	get := func(name string) string {
		if vs := r.Headers[name]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	id := get(evidence.HeaderMsgID)
	if strings.HasPrefix(id, ImportMsgIDPrefix) && get(ledger.HeaderOriginalMsgID) != "" {
		id = get(ledger.HeaderOriginalMsgID)
	}
	l := &evidence.Leaf{Seq: r.Seq, Time: t, Subject: r.Subject, Data: r.Raw}
	if b := get(ledger.HeaderBridge); b != "" {
		l.Headers = append(l.Headers, evidence.Header{Name: evidence.HeaderBridge, Value: b})
	}
	if c := get(ledger.HeaderMsgIDClash); c != "" {
		l.Headers = append(l.Headers, evidence.Header{Name: evidence.HeaderMsgIDClash, Value: c})
	}
	if id != "" {
		l.Headers = append(l.Headers, evidence.Header{Name: evidence.HeaderMsgID, Value: id})
	}
	return l, nil
}

// treeRoot accumulates the tree of a file's lines while they are those of
// the log from seq 1 without a gap.
type treeRoot struct {
	f  evidence.Frontier
	ok bool // every line so far is leaf Seq-1
}

func newTreeRoot() treeRoot { return treeRoot{ok: true} }

func (t *treeRoot) add(r *Record) {
	if !t.ok || int64(r.Seq) != t.f.Size()+1 {
		t.ok = false
		return
	}
	l, err := LeafOf(r)
	if err != nil {
		t.ok = false
		return
	}
	h, err := l.Hash()
	if err != nil {
		t.ok = false
		return
	}
	t.f.Append(h)
}

// root returns the root (standard base64) when the lines were the log's
// from seq 1, else "".
func (t *treeRoot) root() string {
	if !t.ok || t.f.Size() == 0 {
		return ""
	}
	return t.f.Root().String()
}

// VerifyCheckpoint reads an export from seq 1, verifies its chain (a
// *LineError as VerifyChain) and checks that its first cp.Size lines are
// the leaves of the tree cp signs (ErrTreeMismatch otherwise, also when
// the file does not start at seq 1, has a gap, or has fewer lines). The
// caller checks cp's signature first (evidence.OpenCheckpoint). Lines
// after cp.Size are verified by the chain only.
func VerifyCheckpoint(r io.Reader, cp evidence.Checkpoint) (Summary, error) {
	c := NewChainReader(r)
	t := newTreeRoot()
	for {
		rec, err := c.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c.Summary(), err
		}
		if t.f.Size() < cp.Size {
			t.add(rec)
		}
	}
	sum := c.Summary()
	switch {
	case !t.ok:
		return sum, fmt.Errorf("%w: the file is not the log from seq 1 without a gap (first seq %d, contiguous %t)", ErrTreeMismatch, sum.FirstSeq, sum.Contiguous)
	case t.f.Size() < cp.Size:
		return sum, fmt.Errorf("%w: the checkpoint has %d leaves, the file %d lines", ErrTreeMismatch, cp.Size, t.f.Size())
	case t.f.Root() != cp.Hash:
		return sum, fmt.Errorf("%w: the first %d lines have root %s, the checkpoint %s", ErrTreeMismatch, cp.Size, t.f.Root(), cp.Hash)
	}
	return sum, nil
}
