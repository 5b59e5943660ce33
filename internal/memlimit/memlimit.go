// Package memlimit sets the Go runtime's memory policy of a ledger process:
// the collector's GOGC (default DefaultGCPercent) and an optional soft
// memory limit from LEDGER_MEMORY_LIMIT.
//
// The Pebble store sizes its own memory (memtables and block cache, about
// 96 MiB by default, see projections.StoreOptions). In a pure-Go build
// (CGO_ENABLED=0, as the Makefile and deploy/Dockerfile build the binary)
// that memory is on the Go heap, and with the runtime's default GOGC=100
// the heap grows to twice what is live before a collection: a process
// folding 1M events peaked at 297 MiB. With GOGC=50 it peaks at 230 MiB,
// and at 225 MiB folding 3M: flat in the number of events. The collector
// runs twice as often, but its work stays proportional to the heap. (With
// cgo, Pebble's memory is C memory the collector does not see, and glibc's
// arenas fragment: the peak grew by 17% from 1M to 10M events.)
//
// A soft limit (LEDGER_MEMORY_LIMIT, off by default) bounds the heap more
// tightly, but a process whose live heap is near it collects without end:
// `ledger serve` holds the embedded NATS server's caches as well as the
// store, and a 200 MiB limit cut a rebuild beside a busy stream to a third
// of its speed. Set it from the memory the process is given, well above
// what it keeps live.
package memlimit

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// EnvVar names the limit; GoEnvVar, when set, wins over it, and GOGCEnvVar
// over DefaultGCPercent (the runtime has already applied them).
const (
	EnvVar     = "LEDGER_MEMORY_LIMIT"
	GoEnvVar   = "GOMEMLIMIT"
	GOGCEnvVar = "GOGC"
)

// Default is the limit when EnvVar is unset: none.
const Default int64 = 0

// DefaultGCPercent is the collector's GOGC unless GOGC is set.
const DefaultGCPercent = 50

// ErrInvalid is wrapped by Parse errors.
var ErrInvalid = errors.New("memlimit: invalid size")

// Parse reads a size: a number of bytes with an optional unit (B, KiB,
// MiB, GiB, or K, M, G, also binary), or "off" (0: no limit). A size must
// be 0 or at least 16 MiB: below that the collector would run without end.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "off") {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %q (want bytes with an optional unit, e.g. 200MiB, or off)", ErrInvalid, s)
	case n < 0 || n > (1<<62)/mult:
		return 0, fmt.Errorf("%w: %q is out of range", ErrInvalid, s)
	case n*mult != 0 && n*mult < 16<<20:
		return 0, fmt.Errorf("%w: %q is under 16MiB (use off for no limit)", ErrInvalid, s)
	}
	return n * mult, nil
}

// Apply sets the collector's GOGC to DefaultGCPercent unless
// lookup(GOGCEnvVar) is set, and the process's soft memory limit from
// lookup(EnvVar) (Default, none, when unset or empty) unless
// lookup(GoEnvVar) is set (the runtime applied those at start). It returns
// the limit in force in bytes (0: none, -1: GOMEMLIMIT's) and an error
// wrapping ErrInvalid for a bad value, in which case it changes nothing.
func Apply(lookup func(string) (string, bool)) (int64, error) {
	limit := int64(-1)
	if v, ok := lookup(GoEnvVar); !ok || v == "" {
		limit = Default
		if v, ok := lookup(EnvVar); ok && v != "" {
			n, err := Parse(v)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", EnvVar, err)
			}
			limit = n
		}
	}
	if v, ok := lookup(GOGCEnvVar); !ok || v == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	switch limit {
	case -1:
	case 0:
		debug.SetMemoryLimit(math.MaxInt64) // the runtime's "no limit"
	default:
		debug.SetMemoryLimit(limit)
	}
	return limit, nil
}
