package projections

import (
	"errors"
	"fmt"
	"time"

	"github.com/mewledger/ledger/projections/fold"
)

// PipelineOptions configures a Pipeline.
type PipelineOptions struct {
	// Folder is the fold; default NewFolder().
	Folder *fold.Folder
	// Presize, if > 0, sizes each batch's overlay for about that many
	// events (a rebuild's runs are large: growing the maps was
	// measurable). 0 lets the maps grow.
	Presize int
	// SkipTree leaves the Merkle tree out (tree.go): for measuring what
	// the tree costs (`ledger bench`), never for a served store, which
	// then has no tree (ErrNoTree for every later pipeline).
	SkipTree bool
}

// Validate checks the options and fills defaults.
func (o *PipelineOptions) Validate() error {
	if o.Presize < 0 {
		return fmt.Errorf("projections: pipeline options: Presize %d is negative", o.Presize)
	}
	if o.Folder == nil {
		o.Folder = fold.NewFolder()
	}
	return nil
}

// Pipeline is the one way events reach the store: fold, hand off, commit,
// settle. Fold folds a run of events into a new [Batch], hands it off
// ([Batch.Handoff]) and commits it, with the run's last sequence as the
// checkpoint in the same Pebble batch, on a goroutine of its own; the next
// run folds meanwhile, reading the handed-off writes as if committed. Once
// a commit has succeeded the pipeline settles it: it calls the run's
// settle callback (an acknowledgement, a progress report), so that nothing
// is acknowledged before it is committed. One commit is in flight at a
// time, and commits and settles happen in run order.
//
// The Projector (from a durable consumer) and Rebuild (from an ordered
// consumer) are loops around a Pipeline; it knows nothing of NATS. It is
// used by one goroutine (its owner): settle callbacks run on it, from
// Fold, Settle or Close. The commit goroutine is the pipeline's own: Close
// (or Settle) waits for it.
//
// A pipeline folds each sequence once: events below [Pipeline.Next] are
// skipped (a redelivery, or a run fed again after a restart: Next starts
// at the store's checkpoint + 1), and the rest of a run must follow on
// without a gap. After any error the pipeline is stopped: every later
// Fold returns that error, and nothing more is committed.
type Pipeline struct {
	store    *Store
	opts     PipelineOptions
	next     uint64          // the sequence the next folded event must have
	inflight *commitInFlight // the commit running, nil when none
	err      error           // the error that stopped the pipeline
	tree     *treeWriter     // nil with SkipTree
}

// commitInFlight is a handed-off batch being committed by the pipeline's
// commit goroutine.
type commitInFlight struct {
	b      *Batch
	info   BatchInfo
	start  time.Time // when its fold began (BatchInfo.Took)
	settle func(BatchInfo)
	done   chan struct{} // closed by the commit goroutine when Commit ended
	// Set by the commit goroutine before it closes done.
	err       error
	committed time.Time
}

// NewPipeline returns a pipeline into store, whose next event must be the
// one after the store's checkpoint. Each event's Merkle tree leaf is added
// with its fold (tree.go, unless opts.SkipTree); a store at seq N > 0
// without the tree's leaf N-1 is refused (ErrNoTree). The caller keeps ownership of store,
// and must not write to it through anything else while the pipeline is
// open.
func NewPipeline(store *Store, opts PipelineOptions) (*Pipeline, error) {
	if store == nil {
		return nil, fmt.Errorf("projections: NewPipeline needs a Store")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := &Pipeline{store: store, opts: opts, next: store.AppliedSeq() + 1}
	if !opts.SkipTree {
		var err error
		if p.tree, err = newTreeWriter(store); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Next returns the sequence of the next event the pipeline folds: one past
// the last event folded (committed or in flight), or the store's
// checkpoint + 1 before any.
func (p *Pipeline) Next() uint64 { return p.next }

// Fold folds the events of evs from Next on into a new batch, then settles
// the commit in flight (if any), hands the new batch off and starts its
// commit; settle (may be nil) is called with the batch's BatchInfo
// (LastStored is the last event's Time) once it has committed, from a
// later Fold, Settle or Close. Events of evs below
// Next are skipped; the others must be consecutive from Next, else Fold
// folds nothing and returns an error wrapping ErrGap. A run with nothing
// to fold writes nothing (settle is never called).
//
// A failed commit is reported as the error of the Fold, Settle or Close
// that settles it, and outranks the fold's own error (a fold that read
// through a batch whose commit failed may have failed for that).
func (p *Pipeline) Fold(evs []fold.Event, settle func(BatchInfo)) error {
	if p.err != nil {
		return p.err
	}
	for len(evs) > 0 && evs[0].Seq < p.next {
		evs = evs[1:] // folded before
	}
	if len(evs) == 0 {
		return nil
	}
	for i, ev := range evs {
		if want := p.next + uint64(i); ev.Seq != want {
			return p.stop(fmt.Errorf("%w: expected seq %d, got %d", ErrGap, want, ev.Seq))
		}
	}
	c := &commitInFlight{start: time.Now(), settle: settle, done: make(chan struct{})}
	c.b = p.store.newBatchFor(p.opts.Presize)
	if err := p.fold(c.b, evs); err != nil {
		c.b.Discard()
		if serr := p.Settle(); serr != nil {
			return serr
		}
		return p.stop(err)
	}
	if err := p.Settle(); err != nil {
		c.b.Discard()
		return err
	}
	if err := c.b.Handoff(); err != nil {
		c.b.Discard()
		return p.stop(fmt.Errorf("projections: hand off seq %d..: %w", evs[0].Seq, err))
	}
	last := evs[len(evs)-1]
	c.info = BatchInfo{Events: len(evs), FirstSeq: evs[0].Seq, LastSeq: last.Seq, LastStored: last.Time}
	p.next = last.Seq + 1
	p.inflight = c
	go func() {
		err := c.b.Commit(c.info.LastSeq)
		c.err, c.committed = err, time.Now()
		close(c.done)
	}()
	return nil
}

// fold prepares evs and applies them to b.
func (p *Pipeline) fold(b *Batch, evs []fold.Event) error {
	if err := p.opts.Folder.Prepare(b, evs); err != nil {
		return fmt.Errorf("projections: prepare seq %d..: %w", evs[0].Seq, err)
	}
	for i := range evs {
		if _, err := p.opts.Folder.Apply(b, evs[i]); err != nil {
			return fmt.Errorf("projections: fold seq %d: %w", evs[i].Seq, err)
		}
		if p.tree != nil {
			if err := p.tree.add(b, &evs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Committed returns a channel that is closed when the commit in flight has
// ended, nil when there is none (a select on it then waits for ever): a
// loop waiting for input selects on it and calls Settle, which then does
// not wait.
func (p *Pipeline) Committed() <-chan struct{} {
	if p.inflight == nil {
		return nil
	}
	return p.inflight.done
}

// Settle waits for the commit in flight, if any, and settles it: its
// settle callback when it committed, else the pipeline stops with a
// *CommitError (naming the batch's last sequence), which Settle returns.
// With no commit in flight it returns nil.
func (p *Pipeline) Settle() error {
	c := p.inflight
	if c == nil {
		return nil
	}
	<-c.done
	p.inflight = nil
	if c.err != nil {
		// What was folded after it read its writes: nothing more may be
		// committed, and the store's checkpoint says where to resume.
		return p.stop(&CommitError{seq: c.info.LastSeq, err: c.err})
	}
	c.info.Took = c.committed.Sub(c.start) // fold + commit, not the wait to settle
	if c.settle != nil {
		c.settle(c.info)
	}
	return nil
}

// Close settles the commit in flight and stops the pipeline (a later Fold
// returns ErrClosed); it returns Settle's error. It is safe to call more
// than once (then it returns nil).
func (p *Pipeline) Close() error {
	err := p.Settle()
	if p.err == nil {
		p.err = ErrClosed
	}
	return err
}

// stop stops the pipeline with err (the first error wins) and returns it.
func (p *Pipeline) stop(err error) error {
	if p.err == nil {
		p.err = err
	}
	return err
}

// CommitError is a pipeline commit that failed; Settle and the loops
// around the pipeline return it (match it with errors.As).
type CommitError struct {
	seq uint64
	err error
}

func (e *CommitError) Error() string {
	return fmt.Sprintf("projections: commit through seq %d: %v", e.seq, e.err)
}

func (e *CommitError) Unwrap() error { return e.err }

// ErrGap is returned by the pipeline (and a rebuild) when the stream does
// not hold an event the projection needs next (it starts after the checkpoint + 1): events were
// removed from an append-only log, or the projection belongs to another
// stream. The projector holds at the last good sequence rather than skip
// them (projector/hold.go).
var ErrGap = errors.New("projections: gap between projection and stream")

// BatchInfo describes one committed batch, for metrics.
type BatchInfo struct {
	Events   int           // events folded
	FirstSeq uint64        // first stream sequence folded
	LastSeq  uint64        // checkpoint after the commit
	Took     time.Duration // fold + commit time
	// LastStored is the stream time of the last event: now minus it is the
	// projection's lag behind appends.
	LastStored time.Time
}
