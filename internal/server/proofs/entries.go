package proofs

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// ErrEntryTooLong: an entry bundle in the C2SP framing was asked for, and
// one of its leaves is longer than that framing holds (it is served in
// evidence.FramingLong).
var ErrEntryTooLong = errors.New("proofs: a leaf is too long for the C2SP entry bundle framing")

// bundleReaders bounds the stream reads in flight for one entry bundle.
const bundleReaders = 16

// EntryBundle returns entry bundle n of w leaves (C2SP tlog-tiles
// "tile/entries/<N>[.p/<W>]"): the leaves of indexes 256·n to 256·n+w-1,
// read from the stream, encoded (evidence.Leaf) and framed with f. Each
// leaf is checked against the tree's stored leaf hash (ErrLeafMismatch
// when the stream's message is not the one folded). ErrBeyondTree when the
// tree does not hold those leaves yet; ErrEntryTooLong for a leaf the
// framing cannot hold. A bundle's bytes never change once the tree holds
// its leaves.
func (s *Service) EntryBundle(ctx context.Context, tree Tree, n int64, w int, f evidence.Framing) ([]byte, error) {
	if s.opts.JS == nil {
		return nil, fmt.Errorf("proofs: EntryBundle needs Options.JS")
	}
	if n < 0 || w < 1 || w > evidence.EntryBundleWidth || n > (1<<62)/evidence.EntryBundleWidth {
		return nil, fmt.Errorf("%w: entry bundle %d of width %d", ErrNotFound, n, w)
	}
	first := n * evidence.EntryBundleWidth
	if end := first + int64(w); end > tree.TreeSize() {
		return nil, fmt.Errorf("%w: entry bundle %s needs %d leaves, the tree has %d", ErrBeyondTree, evidence.EntriesPath(n, w), end, tree.TreeSize())
	}
	stream, err := s.opts.JS.Stream(ctx, subjects.StreamName)
	if err != nil {
		return nil, fmt.Errorf("proofs: stream %s: %w", subjects.StreamName, err)
	}
	imported := ledger.ImportedThrough(stream.CachedInfo().Config.Metadata)
	leaves := make([][]byte, w)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bundleReaders)
	for i := range w {
		g.Go(func() error {
			b, err := s.leafAt(gctx, stream, tree, first+int64(i), imported)
			leaves[i] = b
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	size := 0
	for _, b := range leaves {
		size += 4 + len(b)
	}
	out := make([]byte, 0, size)
	for i, b := range leaves {
		if out, err = evidence.AppendBundleEntry(out, b, f); err != nil {
			return nil, fmt.Errorf("%w: seq %d's leaf is %d bytes (over %d): ask with ?%s", ErrEntryTooLong, first+int64(i)+1, len(b), evidence.MaxBundleEntryBytes, evidence.FramingLongParam)
		}
	}
	return out, nil
}

// leafAt reads the message of leaf index i from the stream and returns its
// leaf bytes, checked against the tree.
func (s *Service) leafAt(ctx context.Context, stream jetstream.Stream, tree Tree, i int64, imported uint64) ([]byte, error) {
	seq := uint64(i) + 1
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			exp := ""
			if h, herr := tree.LeafHash(i); herr == nil {
				exp = h.String()
			}
			return nil, fmt.Errorf("%w: %w", ErrLeafMismatch, s.damaged(integrity.NewDamage(api.DamageMissing, seq, exp, "")))
		}
		return nil, fmt.Errorf("proofs: read seq %d: %w", seq, err)
	}
	ev := projections.StoredEvent(seq, raw.Time, raw.Subject, raw.Header.Get, raw.Data, imported)
	b, err := projections.LeafOf(&ev).AppendBinary(nil)
	if err != nil {
		return nil, fmt.Errorf("proofs: seq %d: %w", seq, err)
	}
	stored, err := tree.LeafHash(i)
	if err != nil {
		return nil, err
	}
	if got := evidence.LeafHash(b); got != stored {
		return nil, fmt.Errorf("%w: %w", ErrLeafMismatch, s.damaged(integrity.NewDamage(api.DamageAltered, seq, stored.String(), got.String())))
	}
	return b, nil
}
