package monitor

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/ops/archive"
)

// The files of the state directory (see the package doc).
const (
	CopyFile       = "log.jsonl"
	CheckpointFile = "checkpoint"
	TargetFile     = "target"
)

// ErrState: the state directory does not hold what the monitor wrote
// (a copy whose chain or root does not verify, a checkpoint of another
// key): it is not the ledger's fault, and nothing is changed.
var ErrState = errors.New("monitor: bad state directory")

// state is the verified copy: its file open for appending, the chain's
// last hash, the tree of its lines, and the checkpoints.
type state struct {
	dir          string
	f            *os.File
	prev         [archive.HashSize]byte
	tree         evidence.Frontier
	accepted     *evidence.Checkpoint // nil: none yet
	acceptedNote []byte
	target       *evidence.Checkpoint // being copied toward, nil when none
	targetNote   []byte
	buf          []byte
}

func (s *state) path(name string) string { return filepath.Join(s.dir, name) }

// acceptedSize returns the accepted checkpoint's size (0 for none).
func (s *state) acceptedSize() int64 {
	if s.accepted == nil {
		return 0
	}
	return s.accepted.Size
}

// openState reads the state directory (made when missing), re-verifies
// the copy against the accepted checkpoint and the target, and drops the
// lines that none of them vouches for.
func openState(dir string, m *Monitor) (*state, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("monitor: state: %w", err)
	}
	s := &state{dir: dir}
	var err error
	if s.accepted, s.acceptedNote, err = readCheckpoint(s.path(CheckpointFile), m); err != nil {
		return nil, err
	}
	if s.target, s.targetNote, err = readCheckpoint(s.path(TargetFile), m); err != nil {
		return nil, err
	}
	if s.target != nil && s.target.Size <= s.acceptedSize() {
		s.target, s.targetNote = nil, nil
		_ = os.Remove(s.path(TargetFile))
	}
	s.f, err = os.OpenFile(s.path(CopyFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("monitor: state: %w", err)
	}
	if err := s.verifyCopy(); err != nil {
		s.f.Close()
		return nil, err
	}
	return s, nil
}

// readCheckpoint reads and opens a kept checkpoint (nil when the file is
// absent).
func readCheckpoint(path string, m *Monitor) (*evidence.Checkpoint, []byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("monitor: state: %w", err)
	}
	cp, _, err := evidence.OpenCheckpoint(b, m.verifier)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w (a state directory of another ledger or key?)", ErrState, path, err)
	}
	return &cp, b, nil
}

// verifyCopy reads the copy from its start: its chain, its seqs (1, 2,
// ...), its root at the accepted size; it truncates the lines past the
// target's size (or the accepted size without a target), left by a stop
// between appending lines and accepting their checkpoint, and leaves the
// file positioned at its end.
func (s *state) verifyCopy() error {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("monitor: state: %w", err)
	}
	keep := s.acceptedSize()
	if s.target != nil {
		keep = s.target.Size
	}
	cr := archive.NewChainReader(s.f)
	var off int64
	var buf []byte
	for s.tree.Size() < keep {
		rec, err := cr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrState, s.path(CopyFile), err)
		}
		if int64(rec.Seq) != s.tree.Size()+1 {
			return fmt.Errorf("%w: %s: line %d holds seq %d", ErrState, s.path(CopyFile), s.tree.Size()+1, rec.Seq)
		}
		l, err := archive.LeafOf(rec)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrState, s.path(CopyFile), err)
		}
		h, err := l.Hash()
		if err != nil {
			return fmt.Errorf("%w: %s: seq %d: %w", ErrState, s.path(CopyFile), rec.Seq, err)
		}
		s.tree.Append(h)
		if buf, err = rec.AppendJSON(buf[:0]); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrState, s.path(CopyFile), err)
		}
		off += int64(len(buf))
		if s.accepted != nil && s.tree.Size() == s.accepted.Size && s.tree.Root() != s.accepted.Hash {
			return fmt.Errorf("%w: %s: the first %d lines have root %s, the accepted checkpoint %s", ErrState, s.path(CopyFile), s.accepted.Size, s.tree.Root(), s.accepted.Hash)
		}
	}
	if s.tree.Size() < s.acceptedSize() {
		return fmt.Errorf("%w: %s holds %d lines, the accepted checkpoint %d leaves", ErrState, s.path(CopyFile), s.tree.Size(), s.acceptedSize())
	}
	head, err := hex.DecodeString(cr.Summary().Head)
	if err != nil || len(head) != archive.HashSize {
		return fmt.Errorf("%w: %s: head %q", ErrState, s.path(CopyFile), cr.Summary().Head)
	}
	copy(s.prev[:], head)
	if err := s.f.Truncate(off); err != nil {
		return fmt.Errorf("monitor: state: %w", err)
	}
	if _, err := s.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("monitor: state: %w", err)
	}
	return nil
}

// appendLeaf appends one verified leaf (the next one) to the copy's
// buffer; flush writes and syncs it.
func (s *state) appendLeaf(l *evidence.Leaf, h [32]byte) error {
	rec := recordOf(l)
	back, err := archive.LeafOf(rec)
	if err != nil || !back.Equal(l) {
		return fmt.Errorf("monitor: seq %d: the export line does not give back the leaf (%v)", l.Seq, err)
	}
	rec.Hash = hexHash(archive.ChainHash(s.prev, rec))
	s.prev = archive.ChainHash(s.prev, rec)
	if s.buf, err = rec.AppendJSON(s.buf); err != nil {
		return err
	}
	s.tree.Append(h)
	return nil
}

func hexHash(h [archive.HashSize]byte) string { return hex.EncodeToString(h[:]) }

// flush writes the buffered lines and syncs the file.
func (s *state) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	if _, err := s.f.Write(s.buf); err != nil {
		return fmt.Errorf("monitor: state: %w", err)
	}
	s.buf = s.buf[:0]
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("monitor: state: %w", err)
	}
	return nil
}

// setTarget keeps cp as the checkpoint being copied toward.
func (s *state) setTarget(cp evidence.Checkpoint, note []byte) error {
	if err := writeFileAtomic(s.path(TargetFile), note); err != nil {
		return err
	}
	s.target, s.targetNote = &cp, bytes.Clone(note)
	return nil
}

// accept keeps cp as the accepted checkpoint (its lines are written).
func (s *state) accept(cp evidence.Checkpoint, note []byte) error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := writeFileAtomic(s.path(CheckpointFile), note); err != nil {
		return err
	}
	s.accepted, s.acceptedNote = &cp, bytes.Clone(note)
	s.target, s.targetNote = nil, nil
	if err := os.Remove(s.path(TargetFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("monitor: state: %w", err)
	}
	return nil
}

func (s *state) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// recordOf returns the export line of a leaf: its seq, time, subject, its
// identity headers as headers, its bytes. archive.LeafOf gives the leaf
// back, and `ledger import` reproduces it.
func recordOf(l *evidence.Leaf) *archive.Record {
	h := make(map[string][]string, len(l.Headers))
	for _, hd := range l.Headers {
		h[hd.Name] = []string{hd.Value}
	}
	return &archive.Record{Seq: l.Seq, Time: archive.FormatTime(l.Time), Subject: l.Subject, Headers: h, Raw: bytes.Clone(l.Data)}
}

// writeFileAtomic writes data beside name and renames it over name, so a
// stop leaves the old or the new content.
func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("monitor: state: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("monitor: state: %w", err)
	}
	return nil
}

// leafHashes returns the leaf hashes of the copy's first n lines (read
// from the file; the copy's end is left where it was).
func (s *state) leafHashes(n int64) ([]tlog.Hash, error) {
	f, err := os.Open(s.path(CopyFile))
	if err != nil {
		return nil, fmt.Errorf("monitor: state: %w", err)
	}
	defer f.Close()
	cr := archive.NewChainReader(f)
	out := make([]tlog.Hash, 0, n)
	for int64(len(out)) < n {
		rec, err := cr.Next()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrState, s.path(CopyFile), err)
		}
		l, err := archive.LeafOf(rec)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrState, s.path(CopyFile), err)
		}
		h, err := l.Hash()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrState, s.path(CopyFile), err)
		}
		out = append(out, h)
	}
	return out, nil
}
