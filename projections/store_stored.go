package projections

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// FirstStored answers, for the append paths, which envelopes the ledger
// has already stored (contract §4: a retry is a duplicate for ever). For each
// ids[i] it sets seqs[i] to the stream sequence at which an envelope with
// that identity (space, id, digest) was first stored, or 0 when the
// projection knows none; len(seqs) must be len(ids). It returns the
// checkpoint read before the lookups: every envelope stored at or below
// it is known to them (the event index of the fold: 'E' space id, and
// 'V' for a version of a reused id that a later event superseded).
//
// It is what the fold's dedup by envelope id reads, with the fold's one
// exception: a ledger/expire the fold refused does not make its retry a
// duplicate (the expirer must be able to write it again). Lookups of one
// call are one Pebble iterator over the keys in order (absent keys cost
// a bloom filter probe); the version of a reused id is read only when
// the id is found with another digest. It reads committed state only and
// is safe for concurrent use with everything else; ErrClosed after Close.
func (s *Store) FirstStored(ids []ledger.Identity, seqs []uint64) (checkpoint uint64, err error) {
	if len(seqs) != len(ids) {
		return 0, fmt.Errorf("projections: first stored: %d identities, %d sequences", len(ids), len(seqs))
	}
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	// The checkpoint first: what Pebble holds after it is at least that.
	checkpoint = s.AppliedSeq()
	clear(seqs)
	if len(ids) == 0 {
		return checkpoint, nil
	}
	type lookup struct {
		key []byte
		i   int
	}
	var buf []byte
	for _, id := range ids {
		buf = slices.Grow(buf, 1+len(id.Space)+len(id.ID)+4)
	}
	ls := make([]lookup, len(ids))
	for i, id := range ids {
		st := len(buf)
		buf = appendSpaceID(buf, tagEventRef, id.Space, id.ID)
		ls[i] = lookup{key: buf[st:len(buf):len(buf)], i: i}
	}
	slices.SortFunc(ls, func(x, y lookup) int { return bytes.Compare(x.key, y.key) })
	it, err := s.db.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("projections: first stored: %w", err)
	}
	var versions []int // ids found under another digest
	for _, l := range ls {
		if !it.SeekPrefixGE(l.key) || !bytes.Equal(it.Key(), l.key) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return 0, fmt.Errorf("projections: first stored: read the event ref of %q in space %q: %w", ids[l.i].ID, ids[l.i].Space, err)
		}
		var ref fold.EventRef
		if err := decodeEventRef(v, &ref); err != nil {
			_ = it.Close()
			return 0, fmt.Errorf("projections: first stored: decode the event ref of %q in space %q: %w", ids[l.i].ID, ids[l.i].Space, err)
		}
		switch {
		case ref.Type == ledger.TypeExpire && ref.Status == fold.EventInvalid:
			// Not a duplicate for the fold (expire ids are the ledger's
			// own: the envelope is an expire too).
		case ref.Digest == ids[l.i].Digest:
			seqs[l.i] = ref.Seq
		default:
			versions = append(versions, l.i)
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("projections: first stored: %w", err)
	}
	for _, i := range versions {
		id := ids[i]
		n, err := getVersion(s.db, id.Space, id.ID, id.Digest)
		if err != nil {
			return 0, fmt.Errorf("projections: first stored: version of %q in space %q: %w", id.ID, id.Space, err)
		}
		seqs[i] = n
	}
	return checkpoint, nil
}

// getVersion reads the sequence of a superseded version of a reused id
// from r (0: none).
func getVersion(r pebble.Reader, space, id, digest string) (uint64, error) {
	v, closer, err := r.Get(auxKey(tagVersion, space, versionID(id, digest)))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	return strconv.ParseUint(string(v), 10, 64)
}
