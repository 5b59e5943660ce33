package evidence

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// VerifyInclusion checks that the leaf with hash leafHash is leaf index of
// the tree cp signs, by the RFC 6962 inclusion proof proof. It fails
// wrapping ErrInclusion (an index outside the tree, or a proof that does
// not lead to cp's root hash).
func VerifyInclusion(cp Checkpoint, index int64, leafHash tlog.Hash, proof tlog.RecordProof) error {
	if index < 0 || index >= cp.Size {
		return fmt.Errorf("%w: leaf %d is not in a tree of %d leaves", ErrInclusion, index, cp.Size)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Hash, index, leafHash); err != nil {
		return fmt.Errorf("%w: leaf %d against tree %d: %v", ErrInclusion, index, cp.Size, err)
	}
	return nil
}

// VerifyConsistency checks that the tree newer signs extends the tree
// older signs, by the RFC 6962 consistency proof proof (tlog.ProveTree's,
// from older.Size to newer.Size; empty when the sizes are equal or older
// is empty). It fails wrapping:
//   - ErrOrigin: the checkpoints name different logs;
//   - ErrShrank: newer has fewer leaves than older;
//   - ErrRewritten (and ErrForked): same size, different root hashes;
//   - ErrForked: the proof does not show that newer extends older.
//
// The caller checks both checkpoints' signatures first (OpenCheckpoint).
func VerifyConsistency(older, newer Checkpoint, proof tlog.TreeProof) error {
	if older.Origin != newer.Origin {
		return fmt.Errorf("%w: checkpoints of %q and %q", ErrOrigin, older.Origin, newer.Origin)
	}
	switch {
	case newer.Size < older.Size:
		return fmt.Errorf("%w: from %d to %d leaves", ErrShrank, older.Size, newer.Size)
	case newer.Size == older.Size:
		if newer.Hash != older.Hash {
			return fmt.Errorf("%w: %w: two roots for %d leaves: %s and %s", ErrForked, ErrRewritten, older.Size, older.Hash, newer.Hash)
		}
		return nil
	case older.Size == 0:
		return nil // every tree extends the empty one
	}
	if err := tlog.CheckTree(proof, newer.Size, newer.Hash, older.Size, older.Hash); err != nil {
		return fmt.Errorf("%w: tree of %d leaves (%s) does not extend the tree of %d (%s): %v", ErrForked, newer.Size, newer.Hash, older.Size, older.Hash, err)
	}
	return nil
}

// ParseHashes decodes standard-base64 hashes (a proof as JSON carries
// them). An error wraps ErrMalformed and names the position.
func ParseHashes(ss []string) ([]tlog.Hash, error) {
	hs := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		h, err := tlog.ParseHash(s)
		if err != nil {
			return nil, fmt.Errorf("%w: hash %d: %q is not base64 of %d bytes", ErrMalformed, i, s, tlog.HashSize)
		}
		hs[i] = h
	}
	return hs, nil
}

// FormatHashes encodes hashes as standard base64, the inverse of
// ParseHashes.
func FormatHashes(hs []tlog.Hash) []string {
	ss := make([]string, len(hs))
	for i, h := range hs {
		ss[i] = h.String()
	}
	return ss
}
