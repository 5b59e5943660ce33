package bridge

import (
	"testing"
	"time"
)

// TestBackoffCappedJittered: every reconnection wait is at most
// BackoffMax (so a bridge rejoins within about BackoffMax of the
// gateway's return, twice it with the join), at least half of its step,
// and not all the same (jitter).
func TestBackoffCappedJittered(t *testing.T) {
	o := Options{Gateway: "ws://127.0.0.1:1", MEWSpace: "m", Participant: "p", Sink: AppenderSink{}}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if b.opts.BackoffMin != DefaultBackoffMin || b.opts.BackoffMax != DefaultBackoffMax || DefaultBackoffMax > 5*time.Second {
		t.Fatalf("defaults %v..%v, want a cap of a few seconds", b.opts.BackoffMin, b.opts.BackoffMax)
	}
	seen := map[time.Duration]bool{}
	for n := range 64 {
		step := min(DefaultBackoffMin<<min(n, 20), DefaultBackoffMax)
		for range 20 {
			d := b.backoff(n)
			if d > DefaultBackoffMax || d < step/2 {
				t.Fatalf("backoff(%d) = %v, want %v..%v", n, d, step/2, step)
			}
			seen[d] = true
		}
	}
	if len(seen) < 100 {
		t.Errorf("%d distinct waits: no jitter", len(seen))
	}
}
