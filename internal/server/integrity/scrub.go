package integrity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/subjects"
)

// Defaults of ScrubOptions.
const (
	// DefaultPeriod is the shortest time between two full passes.
	DefaultPeriod = 24 * time.Hour
	// DefaultRate bounds a full pass, in messages a second (a few per
	// cent of one core: see docs/performance.md).
	DefaultRate = 2000
	// DefaultTailInterval is how often the messages folded since the last
	// look are checked (the checkpoint interval's default).
	DefaultTailInterval = time.Second
)

// ScrubOptions configures a Scrubber.
type ScrubOptions struct {
	// JS reads the stream. Required.
	JS jetstream.JetStream
	// Tree returns the projection's tree in place (an online rebuild
	// replaces it). Required.
	Tree func() Tree
	// State receives the damage found. Required.
	State *State
	// Period is the shortest time between the starts of two full passes
	// (DefaultPeriod); Rate bounds a full pass in messages a second
	// (DefaultRate; negative: no bound).
	Period time.Duration
	Rate   int
	// TailInterval is how often the messages folded since the last look
	// are checked, whatever the pass is doing (DefaultTailInterval; the
	// ledger passes its checkpoint interval).
	TailInterval time.Duration
	// Logger gets a line per pass and per finding.
	Logger zerolog.Logger
}

// Scrubber re-reads the stream while the ledger serves (see the package
// comment). Run is its one goroutine's body; Status is safe for
// concurrent use.
type Scrubber struct {
	o   ScrubOptions
	log zerolog.Logger

	mu     sync.Mutex
	status api.Scrub
	// kick asks for a full pass now (tests, `ledger verify --scrub`
	// online is not one).
	kick chan struct{}
}

// NewScrubber validates o and returns the scrubber (not running).
func NewScrubber(o ScrubOptions) (*Scrubber, error) {
	if o.JS == nil || o.Tree == nil || o.State == nil {
		return nil, errors.New("integrity: ScrubOptions needs JS, Tree and State")
	}
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.TailInterval <= 0 {
		o.TailInterval = DefaultTailInterval
	}
	if o.Period < 0 {
		return nil, fmt.Errorf("integrity: negative scrub period %v", o.Period)
	}
	s := &Scrubber{o: o, log: o.Logger.With().Str(logging.KeyComponent, "scrub").Logger(), kick: make(chan struct{}, 1)}
	s.status.Rate, s.status.Period = o.Rate, o.Period.String()
	return s, nil
}

// Status returns the scrub's progress.
func (s *Scrubber) Status() api.Scrub {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Findings = s.o.State.Findings()
	return st
}

// Kick starts a full pass now, when none is running.
func (s *Scrubber) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Scrubber) update(f func(*api.Scrub)) {
	s.mu.Lock()
	f(&s.status)
	s.mu.Unlock()
}

// Run scrubs until ctx is done, then returns nil. Every TailInterval it
// checks the messages folded since the last look (the tail), re-checks
// the damage in force (cleared when it checks good: the stream was
// restored), and compares the stream's own counts; beside that, a full
// pass reads the whole log from seq 1 at most Rate messages a second,
// one starting at most every Period (the first at the start). Both are
// goroutines of Run's: it returns once both have.
func (s *Scrubber) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runPasses(ctx)
	}()
	s.runTail(ctx)
	<-done
	return nil
}

// runTail is the tail's loop (see Run).
func (s *Scrubber) runTail(ctx context.Context) {
	t := time.NewTicker(s.o.TailInterval)
	defer t.Stop()
	var tail uint64 // checked through
	first := true
	for {
		tree := s.o.Tree()
		size := uint64(max(tree.TreeSize(), 0))
		if first {
			// What was folded before the start is the full pass's.
			first, tail = false, size
			s.update(func(st *api.Scrub) { st.CheckedThrough = tail })
		}
		if size < tail {
			tail = size // a rebuild from scratch
		}
		// The damage in force first: cleared when it checks good.
		s.recheck(ctx, tree)
		for size > tail && ctx.Err() == nil {
			n, d, err := CheckRange(ctx, s.o.JS, tree, tail+1, size, CheckOptions{Batch: 1024})
			s.update(func(st *api.Scrub) { st.Checked += n })
			if err != nil {
				s.cannot(ctx, err)
				break
			}
			if d == nil {
				tail = size
				break
			}
			s.found(*d)
			tail = d.Seq // past it the tail goes on
		}
		s.update(func(st *api.Scrub) { st.CheckedThrough = tail })
		s.checkCounts(ctx, size)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runPasses is the full passes' loop (see Run).
func (s *Scrubber) runPasses(ctx context.Context) {
	var lastStart time.Time
	for first := true; ; first = false {
		if !first {
			wait := time.NewTimer(max(s.o.Period-time.Since(lastStart), 0))
			select {
			case <-ctx.Done():
				wait.Stop()
				return
			case <-s.kick:
			case <-wait.C:
			}
			wait.Stop()
		}
		lastStart = time.Now()
		end := uint64(max(s.o.Tree().TreeSize(), 0))
		if end == 0 {
			continue
		}
		s.log.Debug().Uint64("pass_end", end).Msg("scrub pass starting")
		next := uint64(1)
		s.update(func(st *api.Scrub) { st.Position, st.PassEnd = next, end })
		for next <= end {
			n, d, err := CheckRange(ctx, s.o.JS, s.o.Tree(), next, end, CheckOptions{Batch: 128, Pace: s.pace,
				Progress: func(p uint64) { s.update(func(st *api.Scrub) { st.Position = p }) }})
			s.update(func(st *api.Scrub) { st.Checked += n })
			switch {
			case ctx.Err() != nil:
				return
			case d != nil:
				s.found(*d)
				next = d.Seq + 1
			case err != nil:
				// Nothing concluded: try again from where it stood.
				s.cannot(ctx, err)
				next = max(next, s.Status().Position)
				if !sleep(ctx, s.o.TailInterval) {
					return
				}
			default:
				next = end + 1
			}
			s.update(func(st *api.Scrub) { st.Position = next })
		}
		s.log.Debug().Uint64("pass_end", end).Dur("took", time.Since(lastStart)).Msg("scrub pass ended")
		s.update(func(st *api.Scrub) {
			st.Passes++
			st.Position, st.PassEnd = 0, 0
			st.LastPassEnded = time.Now().UTC().Format(time.RFC3339)
		})
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pace sleeps as long as n messages take at Rate.
func (s *Scrubber) pace(ctx context.Context, n int) error {
	if s.o.Rate < 0 {
		return nil
	}
	d := time.Duration(n) * time.Second / time.Duration(s.o.Rate)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// recheck checks the damaged sequence again and clears the damage when it
// is as the tree holds it.
func (s *Scrubber) recheck(ctx context.Context, tree Tree) {
	d, ok := s.o.State.Current()
	if !ok || d.Kind == api.DamageRewritten || int64(d.Seq) > tree.TreeSize() {
		return
	}
	now, err := CheckSeq(ctx, s.o.JS, tree, d.Seq)
	if err != nil {
		return
	}
	if now == nil {
		if s.o.State.Clear(d.Kind, d.Seq) {
			s.log.Warn().Uint64("seq", d.Seq).Str("kind", d.Kind).Msg("the damaged sequence checks good again: the log is whole up to there")
		}
		return
	}
	if *now != d {
		s.found(*now)
	}
}

// checkCounts compares the stream's own first, last and count: a
// sequence deleted below the tree's size is missing, whatever else the
// stream claims.
func (s *Scrubber) checkCounts(ctx context.Context, size uint64) {
	stream, err := s.o.JS.Stream(ctx, subjects.StreamName)
	if err != nil {
		return
	}
	info := stream.CachedInfo()
	st := info.State
	if st.Msgs == 0 || st.LastSeq < st.FirstSeq || st.Msgs == st.LastSeq-st.FirstSeq+1 {
		return
	}
	full, err := stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return
	}
	for _, seq := range full.State.Deleted {
		if seq > 0 && seq <= size {
			if d, err := confirmMissing(ctx, stream, s.o.Tree(), seq); err == nil && d != nil {
				s.found(*d)
			}
			return
		}
	}
}

func (s *Scrubber) found(d api.LogDamage) {
	if s.o.State.Report(d) {
		s.log.Error().Str("kind", d.Kind).Uint64("seq", d.Seq).Str("expected", d.Expected).Str("found", d.Found).
			Msg(d.Message + "; not ready, signing stopped at the last good size")
	}
}

func (s *Scrubber) cannot(ctx context.Context, err error) {
	if ctx.Err() == nil {
		s.log.Warn().Err(err).Msg("cannot scrub the log now; retrying")
	}
}
