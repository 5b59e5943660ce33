package projector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// Log keys used by the projector and the expirer.
const (
	logKeySeq     = "seq"
	logKeyEvents  = "events"
	logKeyDurable = "durable"
	logKeyTook    = "took"
	logKeySpace   = "space"
	logKeyID      = "proposal"
)

// Defaults of Options.
const (
	DefaultDurable   = "projector"
	DefaultBatchSize = 1000
	DefaultAckWait   = 2 * time.Minute
)

// Pull request timing of the projector's consumer. The expiry bounds how
// long a pull that delivers nothing stalls the projection (a pull lost in
// a leader change; and, under a burst of ingest, the stall below): with
// 5 s, the peer harness's end-to-end runs showed the projector idle for
// 2.4–3 s with 70,000 events waiting after a fast `ledger publish -f`,
// and end to end at ~11,000 events/s instead of ~16,000–20,000; with 1 s
// no such plateau was seen (docs/performance.md). Why the pull delivered
// nothing was not pinned down further. The heartbeat is the server's
// smallest (500 ms).
const (
	pullExpiry    = 1 * time.Second
	pullHeartbeat = 500 * time.Millisecond
)

// Options configures a Projector.
type Options struct {
	// Durable is the durable consumer's name; processes that each keep
	// their own Pebble copy use distinct names. Default "projector".
	Durable string
	// BatchSize bounds the events folded into one Pebble commit. Default 1000.
	BatchSize int
	// AckWait is the consumer's ack wait. Default 2m.
	AckWait time.Duration
	// Folder is the fold; default NewFolder().
	Folder *fold.Folder
	// Logger receives one line per start, stop, consumer reset and error.
	Logger zerolog.Logger
	// OnBatch, if set, is called after each commit (from the Run goroutine).
	OnBatch func(projections.BatchInfo)
	// OnHold, if set, is called (from the Run goroutine) while the
	// projector is held at a sequence missing from the stream (hold.go):
	// with the hold when it starts and at every look for the sequence,
	// and with nil once the sequence is back and folding resumes.
	OnHold func(*Hold)
	// HoldPoll is how often a held projector looks for the missing
	// sequence again. Default DefaultHoldPoll.
	HoldPoll time.Duration
	// WaitForStream makes a session that cannot start because the stream
	// is not found wait for it (tried again like a transient failure)
	// instead of ending Run: for a server whose own check of the log
	// names a deleted stream and sees it restored (the ledger's).
	// OnStreamGone, if set, is then called (from the Run goroutine) each
	// time, before the wait: the server holds folding (Pause) until it has
	// compared the stream that comes back with the projection.
	WaitForStream bool
	OnStreamGone  func()
	// OnStorageFull, if set, is called (from the Run goroutine) each time
	// a session cannot start because JetStream could not write the
	// consumer's state (a full disk: the server answers "error creating
	// store for consumer" or "insufficient storage resources"). Such a
	// session is tried again, with a growing wait up to 2 s, until ctx
	// ends, like a transient failure: space freed later lets it start.
	OnStorageFull func(error)
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Durable == "" {
		o.Durable = DefaultDurable
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchSize < 1 || o.BatchSize > 100_000 {
		return fmt.Errorf("projector: projector options: BatchSize %d out of range 1..100000", o.BatchSize)
	}
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	if o.Folder == nil {
		o.Folder = fold.NewFolder()
	}
	if o.HoldPoll <= 0 {
		o.HoldPoll = DefaultHoldPoll
	}
	return nil
}

// Projector folds the LEDGER stream into a Store, from a durable pull
// consumer. The Store's checkpoint is the truth: each batch's changes and
// its last sequence are committed in one Pebble batch, and only then is the
// batch acknowledged to JetStream, so a crash at any point neither loses nor
// double-applies an event (a redelivered event at or below the checkpoint is
// skipped). Batches go through a [Pipeline]: the next batch folds while
// the previous one commits, and commits and acknowledgements stay in
// order. Run must be called at most once at a time.
type Projector struct {
	js    jetstream.JetStream
	store *projections.Store
	opts  Options
	log   zerolog.Logger

	importedThrough uint64 // see ledger.MetaImportedThrough

	mu      sync.Mutex
	paused  bool
	resume  chan struct{}
	running bool
	held    *Hold
}

// New returns a projector of js's LEDGER stream into store. The
// caller keeps ownership of js and store and closes them after Run returns.
func New(js jetstream.JetStream, store *projections.Store, opts Options) (*Projector, error) {
	if js == nil || store == nil {
		return nil, errors.New("projector: New needs a JetStream and a Store")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Projector{js: js, store: store, opts: opts, log: opts.Logger.With().Str(logKeyDurable, opts.Durable).Logger(), resume: make(chan struct{})}, nil
}

// Pause stops folding until Resume: no event that is not folded yet is
// folded (a commit already under way completes). Appends go on and the lag
// grows. For operations (a consistent verify) and tests of backpressure.
func (p *Projector) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resume = make(chan struct{})
	}
}

// Paused reports whether the projector is paused.
func (p *Projector) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Resume undoes Pause.
func (p *Projector) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// consumer returns the durable consumer positioned right after the store's
// checkpoint: the existing one when its acknowledged floor agrees with the
// checkpoint, else a new one (the checkpoint wins: for instance a projection
// directory deleted or restored from a backup).
func (p *Projector) consumer(ctx context.Context) (jetstream.Consumer, error) {
	stream, err := p.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return nil, fmt.Errorf("projector: stream %s: %w", subjects.StreamName, err)
	}
	cp := p.store.AppliedSeq()
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("projector: stream %s info: %w", subjects.StreamName, err)
	}
	if info.State.Msgs > 0 && info.State.FirstSeq > cp+1 {
		// The next sequence is gone from the head of the stream (a lost
		// first block): held, as for one lost further on (hold.go).
		return nil, &missingError{seq: cp + 1}
	}
	if c, err := stream.Consumer(ctx, p.opts.Durable); err == nil {
		ci := c.CachedInfo()
		if ci.AckFloor.Stream == cp && ci.NumAckPending == 0 && ci.Config.AckPolicy == jetstream.AckAllPolicy {
			return c, nil
		}
		p.log.Info().Uint64(logKeySeq, cp).Uint64("ack_floor", ci.AckFloor.Stream).Msg("resetting durable consumer to the projection's checkpoint")
		if err := stream.DeleteConsumer(ctx, p.opts.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("projector: delete consumer %s: %w", p.opts.Durable, err)
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("projector: consumer %s: %w", p.opts.Durable, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:     p.opts.Durable,
		Description: "proposal ledger projector",
		AckPolicy:   jetstream.AckAllPolicy,
		AckWait:     p.opts.AckWait,
		// Unacknowledged at once: the batch committing, the one folding,
		// the two the session buffers and the one nats.go pulls ahead,
		// with room to spare: a stall at this bound waits for a commit.
		MaxAckPending: 8 * p.opts.BatchSize,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
	if cp > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, cp+1
	}
	c, err := stream.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("projector: create consumer %s at seq %d: %w", p.opts.Durable, cp+1, err)
	}
	return c, nil
}

// Run folds until ctx is cancelled (then it finishes and commits the batch
// in hand, stops pulling and returns nil) or a fatal error happens (a
// storage error). A sequence missing from the stream above the
// checkpoint holds it until the sequence is back (hold.go). A session
// whose consumer JetStream cannot store (a full disk) is tried again
// until space is back (Options.OnStorageFull). A session that cannot start for a transient
// reason (a JetStream request timed out or found no responder, a 503: a
// leader election, a node restarting) is tried again, with a growing wait
// up to 2 s, until ctx ends. A message that arrives out of order (after a
// redelivery) restarts the consumer at the checkpoint rather than skipping
// anything.
func (p *Projector) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("projector: projector already running")
	}
	p.running = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()
	p.log.Info().Uint64(logKeySeq, p.store.AppliedSeq()).Msg("projector starting")
	defer func() { p.log.Info().Uint64(logKeySeq, p.store.AppliedSeq()).Msg("projector stopped") }()
	retry := setupRetryFirst
	for {
		err := p.session(ctx)
		var ce *projections.CommitError
		var me *missingError
		switch {
		case ctx.Err() != nil && !errors.As(err, &ce):
			return nil
		case errors.As(err, &me):
			if !p.hold(ctx, me.seq) {
				return nil
			}
			retry = setupRetryFirst
			continue
		case errors.Is(err, errResubscribe):
			retry = setupRetryFirst
			continue
		case p.opts.WaitForStream && streamGone(err):
			if p.opts.OnStreamGone != nil {
				p.opts.OnStreamGone()
			}
			if !waitSetupRetry(ctx, &retry) {
				return nil
			}
			continue
		case storageSetup(err):
			// JetStream cannot store the consumer (its disk is full): the
			// owner is told (it refuses appends and watches for space);
			// tried again until space is back or ctx ends.
			if p.opts.OnStorageFull != nil {
				p.opts.OnStorageFull(err)
			}
			if retry == setupRetryFirst {
				p.log.Warn().Err(err).Msg("projector: JetStream cannot store the consumer; retrying until space is freed")
			}
			if !waitSetupRetry(ctx, &retry) {
				return nil
			}
			continue
		case transientSetup(err):
			// A session that could not start while the cluster elects a
			// leader or a node restarts: tried again until ctx ends.
			p.log.Warn().Err(err).Dur("retry_in", retry).Msg("projector: session not started; retrying")
			if !waitSetupRetry(ctx, &retry) {
				return nil
			}
			continue
		case err != nil:
			p.log.Error().Err(err).Msg("projector failed")
			return err
		}
	}
}

var errResubscribe = errors.New("projector: resubscribe")

// session runs one consumer subscription until ctx ends, an error, or a
// sequence gap that needs a fresh consumer.
func (p *Projector) session(ctx context.Context) (rerr error) {
	// A paused projector holds no consumer and pulls nothing (an import
	// under a paused ledger sees no reader).
	if err := p.waitResumed(ctx, nil); err != nil {
		return err
	}
	c, err := p.consumer(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &setupError{err}
	}
	p.importedThrough, err = importedThrough(ctx, p.js)
	if err != nil {
		return &setupError{err}
	}
	msgs, closed, stopConsume, err := p.consume(ctx, c)
	if err != nil {
		return &setupError{err}
	}
	// Stop pulling before returning; messages not folded are redelivered
	// to the next session (they are above the checkpoint, never acked).
	defer stopConsume()

	// The fold of a batch overlaps the commit of the one before it (see
	// Pipeline); a batch is acknowledged, and reported to OnBatch, only
	// once it has committed, and the commit in flight is settled before
	// the session ends, whatever ends it.
	pl, err := projections.NewPipeline(p.store, projections.PipelineOptions{Folder: p.opts.Folder})
	if err != nil {
		return err
	}
	defer func() {
		// A failed commit outranks whatever ended the session,
		// cancellation included: Run reports it.
		if err := pl.Close(); err != nil {
			rerr = err
		}
	}()
	batch := make([]jetstream.Msg, 0, p.opts.BatchSize)
	for {
		var got bool
		if batch, got, err = p.nextBatch(ctx, pl, msgs, closed, batch[:0]); err != nil {
			return err
		}
		if !got {
			continue
		}
		// Pause holds every event not yet folded, including the batch in
		// hand: after Pause returns, AppliedSeq does not move until Resume
		// (beyond a commit already under way).
		if err := p.waitResumed(ctx, pl); err != nil {
			return err
		}
		if err := p.foldBatch(ctx, pl, batch); err != nil {
			return err
		}
	}
}

// consume starts pulling from c into the returned channel (up to two
// batches ahead); closed is closed when the pulling ends by itself (the
// consumer was deleted: the stream was deleted, or restored from a
// backup). stop ends the pulling and waits for it: call it once, before
// the session returns.
func (p *Projector) consume(ctx context.Context, c jetstream.Consumer) (msgs <-chan jetstream.Msg, closed <-chan struct{}, stop func(), err error) {
	ch := make(chan jetstream.Msg, 2*p.opts.BatchSize)
	sctx, cancel := context.WithCancel(ctx)
	cc, err := c.Consume(func(m jetstream.Msg) {
		select {
		case ch <- m:
		case <-sctx.Done():
		}
	}, jetstream.PullMaxMessages(p.opts.BatchSize),
		// A pull lost in a leader change is noticed within PullExpiry (the
		// default, 30 s, stalled the projection after a failover).
		jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				p.log.Debug().Err(err).Msg("consume")
			}
		}))
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("projector: consume %s: %w", p.opts.Durable, err)
	}
	return ch, cc.Closed(), func() {
		cc.Drain()
		cancel()
		<-cc.Closed()
	}, nil
}

// waitResumed waits out a Pause, settling the commit in flight of pl (nil
// before a session has one) as soon as it ends (its acknowledgement must
// not wait for Resume).
func (p *Projector) waitResumed(ctx context.Context, pl *projections.Pipeline) error {
	for {
		p.mu.Lock()
		paused, resumed := p.paused, p.resume
		p.mu.Unlock()
		if !paused {
			return nil
		}
		var committed <-chan struct{}
		if pl != nil {
			committed = pl.Committed()
		}
		select {
		case <-resumed:
			return nil
		case <-committed:
			if err := pl.Settle(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nextBatch waits (out of a Pause first) for a message, then appends to
// batch what else is already there, up to BatchSize; got is false when
// it settled a commit instead (call it again). A consumer that ended by
// itself (closed) ends the session with errResubscribe.
func (p *Projector) nextBatch(ctx context.Context, pl *projections.Pipeline, msgs <-chan jetstream.Msg, closed <-chan struct{}, batch []jetstream.Msg) (_ []jetstream.Msg, got bool, _ error) {
	if err := p.waitResumed(ctx, pl); err != nil {
		return batch, false, err
	}
	select {
	case <-ctx.Done():
		return batch, false, ctx.Err()
	case <-closed:
		// The consumer is gone: a fresh one starts at the checkpoint.
		if err := pl.Settle(); err != nil {
			return batch, false, err
		}
		p.log.Info().Uint64(logKeySeq, pl.Next()-1).Msg("the consumer ended (deleted with its stream?); resubscribing")
		return batch, false, errResubscribe
	case <-pl.Committed():
		return batch, false, pl.Settle()
	case m := <-msgs:
		batch = append(batch, m)
	}
	for len(batch) < p.opts.BatchSize {
		select {
		case m := <-msgs:
			batch = append(batch, m)
		default:
			return batch, true, nil
		}
	}
	return batch, true, nil
}

// foldBatch folds batch into pl; a sequence gap in it settles what was
// folded and ends the session with errResubscribe, or with a
// *missingError when the stream does not hold the sequence expected.
func (p *Projector) foldBatch(ctx context.Context, pl *projections.Pipeline, batch []jetstream.Msg) error {
	evs, ack, gap, err := p.events(batch, pl.Next())
	if err != nil {
		return err
	}
	if err := pl.Fold(evs, ack); err != nil {
		return err
	}
	if gap > 0 {
		// Out of order: nothing beyond the gap was folded; what was
		// is committed, and a consumer starts at the checkpoint.
		if err := pl.Settle(); err != nil {
			return err
		}
		if gone, err := p.missing(ctx, pl.Next()); err == nil && gone {
			return &missingError{seq: pl.Next()}
		}
		p.log.Info().Uint64(logKeySeq, gap).Uint64("expected", pl.Next()).Msg("sequence gap in delivery; resubscribing")
		return errResubscribe
	}
	return nil
}

// events takes the messages of a batch from sequence next on, in order up
// to a gap (returned, 0 if none), as events, and returns the settle
// callback that acknowledges them once committed and reports them.
func (p *Projector) events(msgs []jetstream.Msg, next uint64) (evs []fold.Event, ack func(projections.BatchInfo), gap uint64, err error) {
	evs = make([]fold.Event, 0, len(msgs))
	var last jetstream.Msg
	var lastStored time.Time
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return nil, nil, 0, fmt.Errorf("projector: message metadata: %w", err)
		}
		seq := md.Sequence.Stream
		if seq < next {
			continue // redelivered, already folded
		}
		if seq > next {
			gap = seq
			break
		}
		evs = append(evs, eventOf(m, md, p.importedThrough))
		last, lastStored = m, md.Timestamp
		next++
	}
	ack = func(info projections.BatchInfo) {
		// AckAll: acknowledging the last message acknowledges the batch.
		// A lost ack only means a redelivery, which the checkpoint skips.
		if err := last.Ack(); err != nil {
			p.log.Debug().Err(err).Uint64(logKeySeq, info.LastSeq).Msg("ack")
		}
		info.LastStored = lastStored // the stream's time, not the event's
		if p.opts.OnBatch != nil {
			p.opts.OnBatch(info)
		}
	}
	return evs, ack, gap, nil
}

// importedThrough reads the stream's import marker (ledger.MetaImportedThrough).
func importedThrough(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, fmt.Errorf("projector: stream %s: %w", subjects.StreamName, err)
	}
	return ledger.ImportedThrough(stream.CachedInfo().Config.Metadata), nil
}

// eventOf turns a stored message into the fold's input.
func eventOf(m jetstream.Msg, md *jetstream.MsgMetadata, importedThrough uint64) fold.Event {
	return projections.StoredEvent(md.Sequence.Stream, md.Timestamp, m.Subject(), m.Headers().Get, m.Data(), importedThrough)
}
