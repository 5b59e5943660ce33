package projector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// RebuildOptions configures Rebuild.
type RebuildOptions struct {
	// UpToSeq is the last sequence to fold; 0 means the stream's last
	// sequence when Rebuild starts (appends after that are left to the
	// projector).
	UpToSeq uint64
	// UpToTime, if set, stops before the first event stored after it.
	UpToTime time.Time
	// BatchSize bounds events per Pebble commit. Default DefaultBatchSize.
	BatchSize int
	// Folder is the fold; default NewFolder().
	Folder *fold.Folder
	// Progress, if set, is called after each commit with the sequence
	// reached and the target sequence.
	Progress func(done, total uint64)
	// SkipTree folds without the Merkle tree (PipelineOptions.SkipTree):
	// for measuring the tree's cost only.
	SkipTree bool
}

// Rebuild folds the LEDGER stream into store from store.AppliedSeq()+1 up
// to the target of opts, reading with an ordered (ephemeral) consumer and
// committing in batches, and returns the last sequence folded. On a fresh
// store it rebuilds the projection from sequence 1; the result is the same,
// byte for byte, as the live projection at that sequence. The caller owns
// store and js; Rebuild is the only writer of store while it runs.
func Rebuild(ctx context.Context, js jetstream.JetStream, store *projections.Store, opts RebuildOptions) (uint64, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Folder == nil {
		opts.Folder = fold.NewFolder()
	}
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, fmt.Errorf("projector: rebuild: stream %s: %w", subjects.StreamName, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("projector: rebuild: stream info: %w", err)
	}
	imported := ledger.ImportedThrough(info.Config.Metadata)
	target := opts.UpToSeq
	if target == 0 || target > info.State.LastSeq {
		if opts.UpToSeq > info.State.LastSeq {
			return 0, fmt.Errorf("%w: sequence %d is beyond the end of the log (last %d)", ErrBeyondLog, opts.UpToSeq, info.State.LastSeq)
		}
		target = info.State.LastSeq
	}
	start := store.AppliedSeq() + 1
	if start > target {
		return store.AppliedSeq(), nil
	}
	if info.State.Msgs > 0 && info.State.FirstSeq > start {
		return 0, fmt.Errorf("%w: rebuild needs seq %d but the stream starts at %d", projections.ErrGap, start, info.State.FirstSeq)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
	})
	if err != nil {
		return 0, fmt.Errorf("projector: rebuild: ordered consumer at %d: %w", start, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(opts.BatchSize))
	if err != nil {
		return 0, fmt.Errorf("projector: rebuild: messages: %w", err)
	}
	stopCtx := context.AfterFunc(ctx, it.Stop)
	defer stopCtx()

	// Two stages: a reader goroutine gathers batches of events from the
	// consumer and decodes them (decoding is pure, so it runs ahead of
	// the fold); this goroutine prefetches each batch's records, folds it
	// and commits it, in order.
	chunks := make(chan rebuildChunk, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(chunks)
		readChunks(it, chunks, done, store.AppliedSeq()+1, target, imported, opts)
	}()
	defer func() {
		close(done)
		it.Stop() // unblocks a reader waiting in Next
		wg.Wait()
	}()

	// The fold of a batch overlaps the commit of the one before it (a
	// third stage, see Pipeline). Each commit is one synced Pebble batch
	// with its checkpoint, so a crash leaves whole batches to resume from;
	// its fsync overlaps the next fold.
	pl, err := projections.NewPipeline(store, projections.PipelineOptions{Folder: opts.Folder, Presize: opts.BatchSize, SkipTree: opts.SkipTree})
	if err != nil {
		return 0, err
	}
	last := store.AppliedSeq()
	progress := func(info projections.BatchInfo) {
		last = info.LastSeq
		if opts.Progress != nil {
			opts.Progress(last, target)
		}
	}
	err = foldChunks(ctx, pl, chunks, progress)
	// The commit in flight is settled before Rebuild returns, so that the
	// sequence returned is the store's checkpoint. A failed commit wins
	// over the fold's error: the batch folding while it failed read its
	// writes until they were gone, and may have failed for that.
	if serr := pl.Close(); serr != nil {
		err = serr
	}
	return last, err
}

// foldChunks is Rebuild's fold stage: it feeds the chunks to pl until they
// end, one of them carries an error, or ctx is done (nothing more is
// folded then).
func foldChunks(ctx context.Context, pl *projections.Pipeline, chunks <-chan rebuildChunk, progress func(projections.BatchInfo)) error {
	for c := range chunks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := pl.Fold(c.evs, progress); err != nil {
			return err
		}
		if c.err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return c.err
		}
	}
	return nil
}

// rebuildChunk is a batch of decoded events for Rebuild's fold stage; err
// (after the events) ends the rebuild.
type rebuildChunk struct {
	evs []fold.Event
	err error
}

// readChunks is Rebuild's reader stage: it reads sequences next..target
// (stopping before the first event stored after opts.UpToTime) in batches
// of opts.BatchSize, decodes each batch and sends it, until the target,
// an error (sent as the last chunk's err), or done is closed.
func readChunks(it jetstream.MessagesContext, out chan<- rebuildChunk, done <-chan struct{}, next, target, imported uint64, opts RebuildOptions) {
	send := func(c rebuildChunk) bool {
		select {
		case out <- c:
			return true
		case <-done:
			return false
		}
	}
	for next <= target {
		evs := make([]fold.Event, 0, min(uint64(opts.BatchSize), target-next+1))
		var err error
		past := false // an event stored after UpToTime was reached
		for ; len(evs) < opts.BatchSize && next <= target; next++ {
			var m jetstream.Msg
			if m, err = it.Next(); err != nil {
				err = fmt.Errorf("projector: rebuild: next after %d: %w", next-1, err)
				break
			}
			md, merr := m.Metadata()
			if merr != nil {
				err = fmt.Errorf("projector: rebuild: metadata: %w", merr)
				break
			}
			if seq := md.Sequence.Stream; seq != next {
				err = fmt.Errorf("%w: expected seq %d, got %d", projections.ErrGap, next, seq)
				break
			}
			ev := eventOf(m, md, imported)
			if !opts.UpToTime.IsZero() && ev.Time.After(opts.UpToTime) {
				past = true
				break
			}
			evs = append(evs, ev)
		}
		fold.DecodeAll(evs)
		if !send(rebuildChunk{evs: evs, err: err}) || err != nil || past {
			return
		}
	}
}

// ErrBeyondLog is returned when a point in time or sequence asked for is
// after the end of the log.
var ErrBeyondLog = errors.New("projector: beyond the end of the log")
