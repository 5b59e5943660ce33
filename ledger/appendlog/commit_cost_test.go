package appendlog

import (
	"testing"
	"time"
)

// TestCostModelThreshold: until both paths are measured the seed decides;
// then a group goes atomic when its plain messages would cost more than a
// small atomic batch, the threshold following the measurements both
// ways, within its bounds.
func TestCostModelThreshold(t *testing.T) {
	m := newCostModel(DefaultMinAtomic)
	if got := m.threshold(); got != DefaultMinAtomic {
		t.Fatalf("unmeasured threshold %d, want the seed %d", got, DefaultMinAtomic)
	}
	m.observeBatch(20, 10*time.Millisecond)
	if got := m.threshold(); got != DefaultMinAtomic {
		t.Fatalf("threshold %d with one path measured, want the seed", got)
	}
	m.observePlain(10, 5*time.Millisecond) // 0.5 ms a message: 20 cost one batch
	if got := m.threshold(); got != 20 {
		t.Fatalf("threshold %d, want 20 (10 ms / 0.5 ms)", got)
	}
	// A batch 50 times a plain message's cost: over the upper bound.
	for range 50 {
		m.observeBatch(30, 100*time.Millisecond)
	}
	if got := m.threshold(); got != minAtomicHi {
		t.Fatalf("threshold %d, want the upper bound %d", got, minAtomicHi)
	}
	// Plain messages grow dear (a slow fsync): atomic batches win early.
	for range 50 {
		m.observePlain(4, 400*time.Millisecond)
	}
	if got := m.threshold(); got != minAtomicLo {
		t.Fatalf("threshold %d, want the lower bound %d", got, minAtomicLo)
	}
	// Large batches do not measure the per-batch cost.
	before := m.batch
	m.observeBatch(minAtomicHi+1, time.Second)
	if m.batch != before {
		t.Fatal("a large batch moved the per-batch cost")
	}
}

// TestCostModelDecision: single envelopes are never atomic and large
// groups always are; in between the threshold decides, except one group
// in exploreEvery, which goes the other way so that both costs stay
// measured.
func TestCostModelDecision(t *testing.T) {
	m := newCostModel(DefaultMinAtomic)
	m.observeBatch(20, 10*time.Millisecond)
	m.observePlain(10, 5*time.Millisecond) // threshold 20
	for range 3 * exploreEvery {
		if m.atomic(1) {
			t.Fatal("a single envelope went atomic")
		}
		if !m.atomic(minAtomicHi) {
			t.Fatalf("a group of %d went plain", minAtomicHi)
		}
	}
	small, large := 0, 0
	for range 2 * exploreEvery {
		if m.atomic(10) {
			small++
		}
		if m.atomic(30) {
			large++
		}
	}
	// 4·exploreEvery decisions in the range: 4 explorations, spread over
	// both sizes by the shared counter.
	if small+(2*exploreEvery-large) != 4 {
		t.Fatalf("groups of 10 atomic %d times, groups of 30 plain %d times: want 4 explorations in all", small, 2*exploreEvery-large)
	}
}
