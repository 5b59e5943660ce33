package appendlog

import (
	"math"
	"sync"
	"time"
)

// The committer's choice between its two durable paths for a group, by
// measured cost (contract §4, group commit). With sync_interval always, a
// plain message costs the server one fsync; an atomic batch costs one
// fsync for the whole group plus, on a single-replica stream, a file store
// the server creates to stage the batch, fsyncs and removes — a cost per
// batch whatever its size, which varies by disk from about one fsync to
// tens of them. So a small group is cheaper as pipelined plain messages
// and a large one as an atomic batch, and where the line lies is a
// property of the disk and the server, not a constant: the committer
// measures both (costModel) and sends a group atomically when its plain
// messages would cost more than one small atomic batch.

const (
	// minAtomicLo and minAtomicHi bound the measured threshold: a group of
	// one is always plain (one fsync either way), one of minAtomicHi or
	// more always atomic.
	minAtomicLo = 2
	minAtomicHi = 128
	// costAlpha is the weight of a new sample in the moving averages.
	costAlpha = 0.2
	// exploreEvery: one group in exploreEvery of the sizes where either
	// path could win takes the other path, so that both costs stay
	// measured as the machine's load changes.
	exploreEvery = 16
	// plainSample is the smallest plain group whose time is a sample.
	plainSample = 4
)

// costModel holds the measured service times of the two paths: an
// exponentially weighted mean of one atomic batch of at most minAtomicHi
// envelopes, and of one plain message. Safe for concurrent use: complete
// observes, gather decides.
type costModel struct {
	mu           sync.Mutex
	seed         int     // the threshold until both paths are measured
	batch, plain float64 // seconds: per small atomic batch, per plain message
	nb, np       int     // samples of each
	groups       int     // decisions in the range where either could win
}

func newCostModel(seed int) *costModel {
	return &costModel{seed: min(max(seed, minAtomicLo), minAtomicHi)}
}

// threshold is the smallest group sent as an atomic batch.
func (m *costModel) threshold() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.thresholdLocked()
}

func (m *costModel) thresholdLocked() int {
	if m.nb == 0 || m.np == 0 || m.plain <= 0 {
		return m.seed
	}
	t := math.Ceil(m.batch / m.plain)
	if t > minAtomicHi {
		return minAtomicHi
	}
	return max(int(t), minAtomicLo)
}

// atomic reports whether a group of n goes as one atomic batch: when n is
// at least the threshold, except for one group in exploreEvery of those
// between minAtomicLo and minAtomicHi, which goes the other way.
func (m *costModel) atomic(n int) bool {
	switch {
	case n < minAtomicLo:
		return false
	case n >= minAtomicHi:
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	atomic := n >= m.thresholdLocked()
	m.groups++
	if m.groups%exploreEvery == 0 {
		return !atomic
	}
	return atomic
}

// observeBatch records the service time d of an atomic batch of n
// envelopes (only small ones measure the per-batch cost).
func (m *costModel) observeBatch(n int, d time.Duration) {
	if n > minAtomicHi || d <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batch = ewma(m.batch, d.Seconds(), m.nb)
	m.nb++
}

// observePlain records the service time d of a plain group of n messages.
// Groups under plainSample are not counted: their time is mostly the
// round trip, not the messages.
func (m *costModel) observePlain(n int, d time.Duration) {
	if n < plainSample || d <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plain = ewma(m.plain, d.Seconds()/float64(n), m.np)
	m.np++
}

func ewma(mean, x float64, n int) float64 {
	if n == 0 {
		return x
	}
	return mean + costAlpha*(x-mean)
}
