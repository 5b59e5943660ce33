package projections

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Metadata of the projection that is not a function of the log: the
// identity of the stream it was folded from (see internal/server/app's log
// check). Meta keys sort before every other key (tag 0x00) and are left
// out of Dump, Digest and Compare, which describe the fold only: a
// rebuild (which has no identity until it is served) and the live
// projection still dump byte-for-byte equal.
//
//	0x00 "format"                               → the store format (store_format.go)
//	0x00 "stream"                               → the stream identity (opaque string)
var (
	metaLowerBound     = []byte{tagCheckpoint} // the first non-meta key
	streamIdentityKey  = []byte("\x00stream")
	errNoIdentityValue = errors.New("projections: empty stream identity")
)

// StreamIdentity returns the identity recorded by SetStreamIdentity, or ""
// when none was (a new or rebuilt projection).
func (s *Store) StreamIdentity() (string, error) {
	if err := s.acquire(); err != nil {
		return "", err
	}
	defer s.release()
	v, closer, err := s.db.Get(streamIdentityKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("projections: read stream identity: %w", err)
	}
	defer closer.Close()
	return string(v), nil
}

// SetStreamIdentity records id, durably, as the identity of the stream
// the projection is folded from.
func (s *Store) SetStreamIdentity(id string) error {
	if id == "" {
		return errNoIdentityValue
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	if err := s.db.Set(streamIdentityKey, []byte(id), s.sync()); err != nil {
		return fmt.Errorf("projections: write stream identity: %w", err)
	}
	return nil
}
