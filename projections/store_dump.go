package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// Dump writes every key/value of the store in key order, one pair a line,
// as two Go-quoted strings separated by a space. Only the meta keys
// (store_meta.go) are left out: every other key, the checkpoint included,
// is a pure function of the log up to the checkpoint, so a rebuild and
// the live projection dump byte-for-byte equal.
func (s *Store) Dump(w io.Writer) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: metaLowerBound}) // not the meta keys (store_meta.go)
	if err != nil {
		return fmt.Errorf("projections: dump: %w", err)
	}
	var line []byte
	for ok := it.First(); ok; ok = it.Next() {
		line = strconv.AppendQuote(line[:0], string(it.Key()))
		line = append(line, ' ')
		line = strconv.AppendQuote(line, string(it.Value()))
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			_ = it.Close()
			return fmt.Errorf("projections: dump: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("projections: dump: %w", err)
	}
	return nil
}

// Digest returns the hex SHA-256 of what Dump writes.
func (s *Store) Digest() (string, error) {
	h := sha256.New()
	if err := s.Dump(h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pebbleLogger sends Pebble's messages to zerolog.
