package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/ledger"
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
	Folder *Folder
	// Progress, if set, is called after each commit with the sequence
	// reached and the target sequence.
	Progress func(done, total uint64)
}

// Rebuild folds the LEDGER stream into store from store.AppliedSeq()+1 up
// to the target of opts, reading with an ordered (ephemeral) consumer and
// committing in batches, and returns the last sequence folded. On a fresh
// store it rebuilds the projection from sequence 1; the result is the same,
// byte for byte, as the live projection at that sequence. The caller owns
// store and js; Rebuild is the only writer of store while it runs.
func Rebuild(ctx context.Context, js jetstream.JetStream, store *Store, opts RebuildOptions) (uint64, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.Folder == nil {
		opts.Folder = NewFolder()
	}
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, fmt.Errorf("projections: rebuild: stream %s: %w", subjects.StreamName, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("projections: rebuild: stream info: %w", err)
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
		return 0, fmt.Errorf("%w: rebuild needs seq %d but the stream starts at %d", ErrGap, start, info.State.FirstSeq)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
	})
	if err != nil {
		return 0, fmt.Errorf("projections: rebuild: ordered consumer at %d: %w", start, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(opts.BatchSize))
	if err != nil {
		return 0, fmt.Errorf("projections: rebuild: messages: %w", err)
	}
	defer it.Stop()
	stopCtx := context.AfterFunc(ctx, it.Stop)
	defer stopCtx()

	// Gather a batch of events, fold it prepared (decoded in parallel, its
	// records read in key order), commit; again until the target.
	b := store.NewBatch()
	defer func() { b.Discard() }()
	last := store.AppliedSeq()
	evs := make([]Event, 0, opts.BatchSize)
	for last < target {
		evs = evs[:0]
		past := false // an event stored after UpToTime was reached
		for next := last + 1; len(evs) < opts.BatchSize && next <= target; next++ {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() != nil {
					return last, ctx.Err()
				}
				return last, fmt.Errorf("projections: rebuild: next after %d: %w", next-1, err)
			}
			md, err := m.Metadata()
			if err != nil {
				return last, fmt.Errorf("projections: rebuild: metadata: %w", err)
			}
			if seq := md.Sequence.Stream; seq != next {
				return last, fmt.Errorf("%w: expected seq %d, got %d", ErrGap, next, seq)
			}
			ev := eventOf(m, md, imported)
			if !opts.UpToTime.IsZero() && ev.Time.After(opts.UpToTime) {
				past = true
				break
			}
			evs = append(evs, ev)
		}
		if len(evs) > 0 {
			if err := opts.Folder.Prepare(b, evs); err != nil {
				return last, fmt.Errorf("projections: rebuild: prepare seq %d..: %w", evs[0].Seq, err)
			}
			for _, ev := range evs {
				if _, err := opts.Folder.Apply(b, ev); err != nil {
					return last, fmt.Errorf("projections: rebuild: fold seq %d: %w", ev.Seq, err)
				}
			}
			seq := evs[len(evs)-1].Seq
			if err := b.Commit(seq); err != nil {
				return last, fmt.Errorf("projections: rebuild: commit through %d: %w", seq, err)
			}
			last, b = seq, store.NewBatch()
			if opts.Progress != nil {
				opts.Progress(last, target)
			}
		}
		if past {
			break
		}
	}
	return last, nil
}

// ErrBeyondLog is returned when a point in time or sequence asked for is
// after the end of the log.
var ErrBeyondLog = errors.New("projections: beyond the end of the log")
