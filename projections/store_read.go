package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
)

// getJSON reads key from r into v; found is false when the key is absent.
func getJSON(r pebble.Reader, key []byte, v any) (found bool, err error) {
	val, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := json.Unmarshal(val, v); err != nil {
		return true, fmt.Errorf("decode %q: %w", key, err)
	}
	return true, nil
}

// Get returns the proposal id of space, or an error wrapping ErrNotFound.
func (s *Store) Get(space, id string) (*api.Proposal, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	var p api.Proposal
	found, err := getJSON(s.db, proposalKey(space, id), &p)
	if err != nil {
		return nil, fmt.Errorf("projections: get proposal %q in space %q: %w", id, space, err)
	}
	if !found {
		return nil, fmt.Errorf("projections: proposal %q in space %q: %w", id, space, ErrNotFound)
	}
	return &p, nil
}

// GetRaw is Get without decoding: the stored JSON of the proposal, which is
// exactly what the HTTP API serves for it (ServedProposal of the *Proposal
// Get returns).
func (s *Store) GetRaw(space, id string) (json.RawMessage, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	v, closer, err := s.db.Get(proposalKey(space, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("projections: proposal %q in space %q: %w", id, space, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("projections: get proposal %q in space %q: %w", id, space, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// History returns the history entries filed under key (a proposal id, or the
// id an orphan or unattributable event was filed under) in sequence order,
// or an error wrapping ErrNotFound when there are none.
func (s *Store) History(space, key string) ([]api.HistoryEntry, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	prefix := historyPrefix(space, key)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: history of %q in space %q: %w", key, space, err)
	}
	var out []api.HistoryEntry
	for ok := it.First(); ok; ok = it.Next() {
		var h api.HistoryEntry
		k := it.Key()
		if len(k) != len(prefix)+8 {
			_ = it.Close()
			return nil, fmt.Errorf("projections: history of %q in space %q: %w: %q", key, space, errBadKey, bytes.Clone(k))
		}
		if err := decodeHistory(binary.BigEndian.Uint64(k[len(prefix):]), it.Value(), &h); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("projections: history of %q in space %q: decode seq %d: %w",
				key, space, binary.BigEndian.Uint64(it.Key()[len(prefix):]), err)
		}
		out = append(out, h)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: history of %q in space %q: %w", key, space, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("projections: history of %q in space %q: %w", key, space, ErrNotFound)
	}
	return out, nil
}

// Stats returns the counters of space; NewStats() when it has none.
func (s *Store) Stats(space string) (*api.Stats, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	st := api.NewStats()
	if _, err := getJSON(s.db, statsKey(space), st); err != nil {
		return nil, fmt.Errorf("projections: stats of space %q: %w", space, err)
	}
	return st, nil
}

// Spaces returns the spaces that have any data, sorted.
func (s *Store) Spaces() ([]string, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	prefix := []byte{tagSpace}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("projections: spaces: %w", err)
	}
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		sp, rest, err := readEsc(it.Key()[1:])
		if err != nil || len(rest) != 0 {
			_ = it.Close()
			return nil, fmt.Errorf("projections: spaces: key %q: %w", it.Key(), errBadKey)
		}
		out = append(out, sp)
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: spaces: %w", err)
	}
	sort.Strings(out) // already in order (the escape preserves it); cheap insurance
	return out, nil
}

// Due is a pending proposal whose deadline has passed.
type Due struct {
	Space    string
	ID       string
	Deadline time.Time
}

// DueExpiries returns up to limit (<= 0 means 1000) pending proposals whose
// expires_at is at or before now, earliest deadline first. The index holds
// only pending proposals with a deadline, so the expirer never scans others.
func (s *Store) DueExpiries(now time.Time, limit int) ([]Due, error) {
	return s.DueExpiriesAfter(now, nil, limit)
}

// Metrics returns Pebble's metrics of the store (diagnostics and
// benchmarks: write volume, compactions, cache). It is safe for concurrent
// use; it returns ErrClosed after Close.
func (s *Store) Metrics() (*pebble.Metrics, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	return s.db.Metrics(), nil
}
