package proofs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// witnessWait is how much longer CheckpointFor waits for a witnessed
// checkpoint than for a signed one.
const witnessWait = 2 * time.Second

// CheckpointFor returns the checkpoint proofs are made against: the one
// of size when size ≥ 0 (ErrNotFound when the ledger signed none of that
// size, ErrBeyondTree when tree does not reach it yet), else the latest
// one tree reaches, waiting (bounded by ctx and three intervals) for one
// that covers at least need leaves (ErrNotCovered).
func (s *Service) CheckpointFor(ctx context.Context, tree Tree, size, need int64) (Entry, error) {
	if size >= 0 {
		e, ok, err := s.cps.At(size)
		if err != nil {
			return Entry{}, err
		}
		if !ok {
			return Entry{}, fmt.Errorf("%w: no checkpoint of tree size %d", ErrNotFound, size)
		}
		if size > tree.TreeSize() {
			return Entry{}, fmt.Errorf("%w: checkpoint %d is past the tree (%d leaves), which is catching up", ErrBeyondTree, size, tree.TreeSize())
		}
		return e, nil
	}
	wait := 3 * s.opts.Interval
	if s.Witnessing() {
		// A witnessed checkpoint also waits for the witnesses' answers;
		// past the wait, the latest signed one is used (a verifier that
		// requires the witnesses then refuses it, saying so).
		wait += witnessWait
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed, wchanged := s.cps.Changed(), s.cps.WitnessedChanged()
		if s.Witnessing() {
			if e, ok := s.cps.Witnessed(); ok && e.Checkpoint.Size >= need && e.Checkpoint.Size <= tree.TreeSize() {
				return e, nil
			}
		}
		e, ok := s.cps.Latest()
		if ok && e.Checkpoint.Size >= need && e.Checkpoint.Size <= tree.TreeSize() && !s.Witnessing() {
			return e, nil
		}
		select {
		case <-changed:
		case <-wchanged:
		case <-deadline.C:
			if ok && e.Checkpoint.Size >= need && e.Checkpoint.Size <= tree.TreeSize() {
				return e, nil
			}
			return Entry{}, fmt.Errorf("%w: need a tree of %d leaves, the latest checkpoint has %d and the tree %d", ErrNotCovered, need, e.Checkpoint.Size, tree.TreeSize())
		case <-ctx.Done():
			return Entry{}, ctx.Err()
		}
	}
}

// ProposalProof returns the evidence bundle of a proposal's history:
// every event filed under it (its history, in stream order, as the
// projection has it) read from the stream in its original bytes, with its
// leaf and inclusion proof against a checkpoint: the one of size when
// size ≥ 0 (then events after it are left out), else the latest, waiting
// briefly for one that covers the whole history (CheckpointFor). Each
// leaf is checked against the tree's stored leaf hash (ErrLeafMismatch
// when the stream's message is not the one folded). A proposal without
// history is ErrNotFound.
func (s *Service) ProposalProof(ctx context.Context, tree Tree, space, id string, size int64) (*evidence.Bundle, error) {
	if s.opts.JS == nil {
		return nil, fmt.Errorf("proofs: ProposalProof needs Options.JS")
	}
	hist, err := tree.History(space, id)
	if errors.Is(err, projections.ErrNotFound) {
		return nil, fmt.Errorf("%w: proposal %q in space %q", ErrNotFound, id, space)
	}
	if err != nil {
		return nil, err
	}
	if err := s.touches(hist[0].Seq, hist[len(hist)-1].Seq); err != nil {
		return nil, err
	}
	e, err := s.CheckpointFor(ctx, tree, size, int64(hist[len(hist)-1].Seq))
	if err != nil {
		return nil, err
	}
	stream, err := s.opts.JS.Stream(ctx, subjects.StreamName)
	if err != nil {
		return nil, fmt.Errorf("proofs: stream %s: %w", subjects.StreamName, err)
	}
	imported := ledger.ImportedThrough(stream.CachedInfo().Config.Metadata)
	var evs []evidence.EventProof
	var buf []byte
	for _, h := range hist {
		if int64(h.Seq) > e.Checkpoint.Size {
			break
		}
		raw, err := stream.GetMsg(ctx, h.Seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			exp := ""
			if lh, err := tree.LeafHash(int64(h.Seq) - 1); err == nil {
				exp = lh.String()
			}
			return nil, s.damaged(integrity.NewDamage(api.DamageMissing, h.Seq, exp, ""))
		}
		if err != nil {
			return nil, fmt.Errorf("proofs: read seq %d: %w", h.Seq, err)
		}
		ev := projections.StoredEvent(h.Seq, raw.Time, raw.Subject, raw.Header.Get, raw.Data, imported)
		leaf := projections.LeafOf(&ev)
		if buf, err = leaf.AppendBinary(buf[:0]); err != nil {
			return nil, fmt.Errorf("proofs: seq %d: %w", h.Seq, err)
		}
		stored, err := tree.LeafHash(leaf.Index())
		if err != nil {
			return nil, err
		}
		if got := evidence.LeafHash(buf); got != stored {
			return nil, fmt.Errorf("%w: %w", ErrLeafMismatch, s.damaged(integrity.NewDamage(api.DamageAltered, h.Seq, stored.String(), got.String())))
		}
		p, err := tlog.ProveRecord(e.Checkpoint.Size, leaf.Index(), tree)
		if err != nil {
			return nil, fmt.Errorf("proofs: prove seq %d in %d: %w", h.Seq, e.Checkpoint.Size, err)
		}
		evs = append(evs, evidence.NewEventProof(leaf, append([]byte(nil), buf...), p))
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w: proposal %q's history begins after checkpoint %d", ErrBeyondTree, id, e.Checkpoint.Size)
	}
	return evidence.NewBundle(e.Note, e.Checkpoint, space, id, evs), nil
}

// Consistency returns the consistency proof from the tree of from leaves
// to the tree of to (tlog.ProveTree; empty when from is 0 or equals to):
// 0 ≤ from ≤ to ≤ tree size, else ErrBeyondTree.
func (s *Service) Consistency(tree Tree, from, to int64) (tlog.TreeProof, error) {
	if from < 0 || from > to || to > tree.TreeSize() {
		return nil, fmt.Errorf("%w: consistency from %d to %d in a tree of %d", ErrBeyondTree, from, to, tree.TreeSize())
	}
	if from == 0 || from == to {
		return tlog.TreeProof{}, nil
	}
	p, err := tlog.ProveTree(to, from, tree)
	if err != nil {
		return nil, fmt.Errorf("proofs: consistency %d → %d: %w", from, to, err)
	}
	return p, nil
}

// Tile returns a C2SP hash tile's bytes (tlog.ReadTileData), ErrBeyondTree
// when the tree does not hold its hashes yet. A tile's bytes never change
// once the tree holds them.
func (s *Service) Tile(tree Tree, t tlog.Tile) ([]byte, error) {
	if t.H != evidence.TileHeight || t.L < 0 {
		return nil, fmt.Errorf("%w: tile %+v", ErrNotFound, t)
	}
	// The tile's last hash is at level t.L*H, index N*2^H + W - 1: the
	// tree must have 2^(L*H) * (N*2^H + W) leaves.
	shift := uint(t.L * t.H)
	if shift > 62 || t.N > 1<<50 {
		return nil, fmt.Errorf("%w: tile %s", ErrBeyondTree, evidence.TilePath(t))
	}
	last := (t.N<<uint(t.H) + int64(t.W))
	if last > (tree.TreeSize()>>shift) || last <= 0 {
		return nil, fmt.Errorf("%w: tile %s needs more leaves than the tree's %d", ErrBeyondTree, evidence.TilePath(t), tree.TreeSize())
	}
	data, err := tlog.ReadTileData(t, tree)
	if err != nil {
		return nil, fmt.Errorf("proofs: tile %s: %w", evidence.TilePath(t), err)
	}
	return data, nil
}

// Inclusion returns the inclusion proof of the leaf of stream sequence seq
// against a checkpoint (CheckpointFor: of size when size ≥ 0, else the
// latest, waiting briefly for one that covers seq). It reads only the
// tree, not the stream.
func (s *Service) Inclusion(ctx context.Context, tree Tree, seq uint64, size int64) (evidence.InclusionProof, error) {
	if seq == 0 {
		return evidence.InclusionProof{}, fmt.Errorf("%w: seq 0", ErrBeyondTree)
	}
	e, err := s.CheckpointFor(ctx, tree, size, int64(seq))
	if err != nil {
		return evidence.InclusionProof{}, err
	}
	if int64(seq) > e.Checkpoint.Size {
		return evidence.InclusionProof{}, fmt.Errorf("%w: seq %d is past checkpoint %d", ErrBeyondTree, seq, e.Checkpoint.Size)
	}
	if err := s.touches(seq, seq); err != nil {
		return evidence.InclusionProof{}, err
	}
	i := int64(seq) - 1
	lh, err := tree.LeafHash(i)
	if err != nil {
		return evidence.InclusionProof{}, err
	}
	p, err := tlog.ProveRecord(e.Checkpoint.Size, i, tree)
	if err != nil {
		return evidence.InclusionProof{}, fmt.Errorf("proofs: prove seq %d in %d: %w", seq, e.Checkpoint.Size, err)
	}
	return evidence.InclusionProof{Seq: seq, LeafIndex: i, TreeSize: e.Checkpoint.Size, LeafHash: lh.String(),
		Proof: evidence.FormatHashes(p), Checkpoint: string(e.Note)}, nil
}

// touches returns the damage in force when it meets sequences from..to
// (integrity.State.Touches), nil otherwise.
func (s *Service) touches(from, to uint64) error {
	if s.opts.Integrity == nil {
		return nil
	}
	return s.opts.Integrity.Touches(from, to)
}

// damaged reports d (when Integrity is set) and returns it as an error.
func (s *Service) damaged(d api.LogDamage) error {
	if s.opts.Integrity != nil {
		if s.opts.Integrity.Report(d) {
			s.log.Error().Str("kind", d.Kind).Uint64("seq", d.Seq).Msg(d.Message + " (found by a proof)")
		}
	}
	return &integrity.DamagedError{Damage: d}
}
