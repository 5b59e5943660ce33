package projections

import (
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// DueExpiriesAfter is DueExpiries resumed after a page: it returns up to
// limit (<= 0 means 1000) pending proposals due at or before now whose
// deadline index entry comes after after's (deadline, space, id) — the last
// Due of the previous page — in the index's order (deadline, then space,
// then id). A nil after starts at the beginning. A page shorter than limit
// is the last.
func (s *Store) DueExpiriesAfter(now time.Time, after *Due, limit int) ([]Due, error) {
	if limit <= 0 {
		limit = 1000
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	lower := []byte{tagDeadline}
	if after != nil {
		// The smallest key above after's: its key with a 0x00 appended
		// (escaped components never end in a bare 0x00).
		lower = append(deadlineKey(clampNanos(after.Deadline), after.Space, after.ID), 0x00)
	}
	upper := prefixEnd([]byte{tagDeadline})
	if n := clampNanos(now); n < math.MaxInt64 {
		upper = appendNanos([]byte{tagDeadline}, n+1)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("projections: due expiries: %w", err)
	}
	var out []Due
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		n, sp, id, err := readDeadlineKey(it.Key())
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("projections: due expiries: key %q: %w", it.Key(), err)
		}
		out = append(out, Due{Space: sp, ID: id, Deadline: time.Unix(0, n).UTC()})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("projections: due expiries: %w", err)
	}
	return out, nil
}
