// Package integrity is the ledger's check of its own log (contract §16,
// "The log checks itself"): State holds the first damaged or missing
// sequence found (kind missing, altered or rewritten, with the leaf hashes
// expected and found), which makes /readyz 503, names itself in
// /v1/status and on the console, stops checkpoint signing at the last good
// size and turns every proof that touches it into a specific error; the
// Scrubber re-reads the stream at a bounded rate while the ledger serves,
// recomputes every message's leaf hash and compares it with the tree
// (CheckRange, which `ledger verify --scrub` also runs offline).
//
// Damage is a state, not a log line: it is kept until the damaged
// sequence checks good again (the stream was restored from a backup or
// an export), then cleared with no restart.
package integrity

import (
	"errors"
	"sync"

	"github.com/mewledger/ledger/api"
)

// ErrDamaged is matched (errors.Is) by every *DamagedError.
var ErrDamaged = errors.New("integrity: the log is damaged")

// DamagedError is an answer that met damage.
type DamagedError struct {
	Damage api.LogDamage
}

func (e *DamagedError) Error() string { return e.Damage.Message }

// Is matches ErrDamaged.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// Damage returns the damage of err (an error wrapping a *DamagedError).
func Damage(err error) (api.LogDamage, bool) {
	var de *DamagedError
	if errors.As(err, &de) {
		return de.Damage, true
	}
	return api.LogDamage{}, false
}

// NewDamage returns the damage of kind at seq, its message filled in.
func NewDamage(kind string, seq uint64, expected, found string) api.LogDamage {
	return api.LogDamage{Kind: kind, Seq: seq, Expected: expected, Found: found,
		Message: api.DamageMessage(kind, seq, expected, found)}
}

// State is the damage in force: the lowest damaged sequence found. Safe
// for concurrent use; the zero value holds no damage.
type State struct {
	mu       sync.Mutex
	d        *api.LogDamage
	findings uint64
	// OnChange, if set before use, is called (outside the lock) with the
	// damage now in force (nil when cleared) whenever it changes.
	OnChange func(*api.LogDamage)
}

// Report records d; it is kept when no damage is in force or when it is
// at a lower sequence than the one in force. It returns whether d is now
// the damage in force.
func (s *State) Report(d api.LogDamage) bool {
	s.mu.Lock()
	if s.d != nil && *s.d == d {
		s.mu.Unlock()
		return false
	}
	s.findings++
	if s.d != nil && s.d.Seq < d.Seq {
		s.mu.Unlock()
		return false
	}
	c := d
	s.d = &c
	cb := s.OnChange
	s.mu.Unlock()
	if cb != nil {
		cb(&c)
	}
	return true
}

// Clear clears the damage in force when it is of kind at seq (that
// sequence checked good again), and reports whether it did.
func (s *State) Clear(kind string, seq uint64) bool {
	s.mu.Lock()
	if s.d == nil || s.d.Kind != kind || s.d.Seq != seq {
		s.mu.Unlock()
		return false
	}
	s.d = nil
	cb := s.OnChange
	s.mu.Unlock()
	if cb != nil {
		cb(nil)
	}
	return true
}

// Current returns the damage in force, false when none.
func (s *State) Current() (api.LogDamage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == nil {
		return api.LogDamage{}, false
	}
	return *s.d, true
}

// Findings counts the damage reported since the start.
func (s *State) Findings() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.findings
}

// Touches returns a *DamagedError when an answer covering sequences
// from..to meets the damage in force: its sequence is in the range, or
// the tree was rewritten (then every proof is suspect); nil otherwise.
func (s *State) Touches(from, to uint64) error {
	d, ok := s.Current()
	if !ok {
		return nil
	}
	if d.Kind == api.DamageRewritten || (from <= d.Seq && d.Seq <= to) {
		return &DamagedError{Damage: d}
	}
	return nil
}

// SignLimit returns the largest tree size that may be signed while the
// damage in force stands (the last good size: one before the damaged
// sequence) and why; ok is false when nothing limits signing.
func (s *State) SignLimit() (size int64, why string, ok bool) {
	d, have := s.Current()
	if !have {
		return 0, "", false
	}
	if d.Kind == api.DamageRewritten {
		return 0, d.Message, true
	}
	return int64(d.Seq) - 1, d.Message, true
}
