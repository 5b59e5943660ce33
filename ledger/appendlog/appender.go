package appendlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mewledger/ledger/ledger"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/subjects"
)

// Appender defaults.
const (
	// DefaultMaxInFlight is AppendMany's window of unacknowledged
	// publishes.
	DefaultMaxInFlight = 256
	// DefaultAckTimeout bounds one publish attempt's wait for its PubAck.
	DefaultAckTimeout = 5 * time.Second
	// DefaultMaxRetries is how many times a publish is retried after a
	// transient failure.
	DefaultMaxRetries = 4
	// DefaultRetryWait is the first backoff between attempts; it doubles
	// (with jitter) up to maxRetryWait.
	DefaultRetryWait = 100 * time.Millisecond
	maxRetryWait     = 2 * time.Second
)

var (
	// ErrAppenderOptions is wrapped by AppenderOptions.Validate errors.
	ErrAppenderOptions = errors.New("ledger: invalid appender options")
)

// AppenderOptions configures an Appender. The zero value is usable.
type AppenderOptions struct {
	// Space is the space of envelopes appended with space "". Default
	// DefaultSpace.
	Space string
	// MaxInFlight is the most envelopes one AppendMany call keeps submitted
	// and unacknowledged (the group commit's queue bounds all callers
	// together). Default DefaultMaxInFlight.
	MaxInFlight int
	// Limits are the submit limits (size, to and correlation_id entries).
	// Zero fields mean their defaults (DefaultSubmitLimits).
	Limits ledger.SubmitLimits
	// Now is the clock for kernel rule V-PROP-010 at submit time. Default
	// time.Now.
	Now func() time.Time
	// AckTimeout bounds each publish attempt. Default DefaultAckTimeout.
	AckTimeout time.Duration
	// MaxRetries is how many times a publish is retried after a transient
	// failure (see IsTransient); 0 means DefaultMaxRetries, negative means
	// never. RetryWait is the first backoff (default DefaultRetryWait).
	// Without an Index, the worst-case time of all attempts must stay
	// well inside the stream's duplicate window, or a retry could store an
	// envelope twice: Validate refuses a budget over half of
	// DefaultDuplicateWindow. With one, each retry looks the envelope up
	// first.
	MaxRetries int
	RetryWait  time.Duration
	// Commit bounds the group commit (batch size, bytes, linger,
	// batches in flight).
	Commit CommitOptions
	// Index, when set, makes a retry a duplicate for ever (contract §4; see
	// Index and stored.go): envelopes it knows are answered duplicate:true
	// with the sequence they were first stored at and not published
	// again; while it is behind the log, the log's per-subject index
	// answers for what it does not know yet, so appends never wait for
	// it. Nil: a retry is recognised within the stream's duplicate window
	// only.
	Index Index
	// MarkKeys, when set, seal the bridge mark of every envelope appended
	// with one (ledger.HeaderBridgeSeal, contract §14): the appender of
	// the ledger's own append paths, which reach it only after the
	// recorder checks. Nil: marks are stored unsealed, and the fold
	// honours none of them.
	MarkKeys *ledger.MarkKeys
}

// Validate fills in defaults and checks the options.
func (o *AppenderOptions) Validate() error {
	if o.Space == "" {
		o.Space = ledger.DefaultSpace
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	} else if o.MaxRetries < 0 {
		o.MaxRetries = -1
	}
	if o.RetryWait == 0 {
		o.RetryWait = DefaultRetryWait
	}
	if err := ledger.CheckSpace(o.Space); err != nil {
		return fmt.Errorf("%w: %w", ErrAppenderOptions, err)
	}
	if err := o.Commit.Validate(); err != nil {
		return err
	}
	switch {
	case o.MaxInFlight < 1:
		return fmt.Errorf("%w: MaxInFlight %d, want ≥ 1", ErrAppenderOptions, o.MaxInFlight)
	case o.AckTimeout < 0 || o.RetryWait < 0:
		return fmt.Errorf("%w: negative AckTimeout or RetryWait", ErrAppenderOptions)
	case o.Limits.MaxBytes > ledger.MaxEnvelopeBytes:
		return fmt.Errorf("%w: Limits.MaxBytes %d is over the %d-byte envelope limit", ErrAppenderOptions, o.Limits.MaxBytes, ledger.MaxEnvelopeBytes)
	}
	if b := o.retryBudget(); b > DefaultDuplicateWindow/2 {
		return fmt.Errorf("%w: worst-case retry time %v exceeds half the duplicate window (%v)", ErrAppenderOptions, b, DefaultDuplicateWindow)
	}
	return nil
}

// retryBudget is the worst-case time of all attempts of one publish.
func (o *AppenderOptions) retryBudget() time.Duration {
	n := max(o.MaxRetries, 0)
	b := time.Duration(n+1) * o.AckTimeout
	for i := 1; i <= n; i++ {
		b += backoff(o.RetryWait, i) * 3 / 2 // with the most jitter
	}
	return b
}

// backoff is the wait before retry n (1-based), without jitter.
func backoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < maxRetryWait; i++ {
		d *= 2
	}
	return min(d, maxRetryWait)
}

// Appender validates envelopes and appends them to the LEDGER stream. It
// is safe for concurrent use. It publishes on the connection of the
// JetStream handle it was made from, which the caller owns and keeps open
// while the Appender is used; Close releases what the Appender holds on
// that connection.
type Appender struct {
	pub  jetstream.JetStream // own handle: its publish options isolated from the caller's
	js   jetstream.JetStream // the caller's, for the stream lookup
	opts AppenderOptions
	c    *groupCommitter

	stMu   sync.Mutex
	stream jetstream.Stream // for verifying duplicates, looked up once

	cov        coverage     // how far back the Index reaches (stored.go)
	logLookups atomic.Int64 // groups (or single appends) looked up in the log (stored.go)
}

// NewAppender returns an Appender publishing through js's connection,
// with its group commit running (two goroutines and a subscription to its
// own inbox for commit replies; Close stops them). It makes no JetStream
// request: the LEDGER stream must exist (EnsureStream, which also turns
// on allow_atomic) before appends succeed.
func NewAppender(js jetstream.JetStream, o AppenderOptions) (*Appender, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrAppenderOptions)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// A JetStream handle of our own for publishing, so that its options
	// never mix with the caller's (publishing does not use the API prefix
	// or domain); stream lookups use js's.
	pub, err := jetstream.New(js.Conn())
	if err != nil {
		return nil, fmt.Errorf("ledger: appender: %w", err)
	}
	a := &Appender{pub: pub, js: js, opts: o}
	if a.c, err = newGroupCommitter(a, js.Conn(), o.Commit); err != nil {
		return nil, err
	}
	return a, nil
}

// Close stops the group commit (envelopes still queued fail with
// ErrClosed; batches sent are awaited) and releases the Appender's
// subscriptions. Call it after every Append* call has returned; it does
// not close the connection. Safe to call twice.
func (a *Appender) Close() {
	a.c.close()
	a.pub.CleanupPublisher()
}

// Space returns the default space.
func (a *Appender) Space() string { return a.opts.Space }

// Prepare decodes raw and checks it as the submit paths must (contract §8),
// with the Appender's limits and clock: PrepareStandalone. space "" is
// the Appender's default space. The error is a *RefusalError. raw is not
// copied.
func (a *Appender) Prepare(space string, raw []byte) (*ledger.Prepared, error) {
	p, _, err := a.prepare(space, raw, true)
	return p, err
}

// prepare is Prepare, or AppendSystem's check when !submit. On a refusal
// it also returns the envelope id when the envelope decoded.
func (a *Appender) prepare(space string, raw []byte, submit bool) (*ledger.Prepared, string, error) {
	if space == "" {
		space = a.opts.Space
	}
	return ledger.PrepareEnvelope(space, raw, a.opts.Limits, a.opts.Now(), submit)
}

// Append validates and appends one envelope and waits for the stream's
// acknowledgement, retrying transient failures (see AppenderOptions). The
// returned error is Result.Err. raw must not be modified until Append
// returns.
func (a *Appender) Append(ctx context.Context, space string, raw []byte) (ledger.Result, error) {
	p, id, err := a.prepare(space, raw, true)
	if err != nil {
		return ledger.Result{ID: id, Err: err}, err
	}
	return a.AppendPrepared(ctx, p)
}

// AppendSystem appends an envelope the ledger writes itself (ledger/expire)
// without the Submittable check; it must still decode to a lifecycle type
// and pass the limits. space "" is the default space.
func (a *Appender) AppendSystem(ctx context.Context, space string, raw []byte) (ledger.Result, error) {
	p, id, err := a.prepare(space, raw, false)
	if err != nil {
		return ledger.Result{ID: id, Err: err}, err
	}
	return a.AppendPrepared(ctx, p)
}

// AppendPrepared appends an envelope from Prepare through the group
// commit (Submit) and waits for its acknowledgement. The returned error
// is Result.Err.
func (a *Appender) AppendPrepared(ctx context.Context, p *ledger.Prepared) (ledger.Result, error) {
	pd, err := a.Submit(ctx, p)
	if err != nil {
		r := ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject,
			Err: fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, err)}
		return r, r.Err
	}
	return pd.Result(ctx)
}

// Submit hands a prepared envelope to the group commit (contract §4) and
// returns at once with its Pending, unless the commit queue is full, when
// it waits for room (or ctx). Envelopes are stored in the order they were
// submitted, in JetStream atomic batches, and each Pending resolves only
// after its batch is stored, in submission order. A batch that is not
// acknowledged as stored (a duplicate member, a lost connection) is
// published again one envelope at a time under the same Nats-Msg-Ids, so
// nothing is stored twice; with more than one batch in flight
// (CommitOptions.BatchesInFlight) its envelopes may then be stored after
// envelopes submitted later (with one, never). A duplicate answer is verified against the
// stored message (see Result.Duplicate). The error is ctx's, or wraps
// ErrClosed. p.Raw must not be modified until the Pending is done.
func (a *Appender) Submit(ctx context.Context, p *ledger.Prepared) (*Pending, error) {
	return a.c.submit(ctx, p)
}

// AppendMany appends envelopes in order through the group commit with at
// most MaxInFlight of them unacknowledged, and returns one Result per
// input, in input order. A refused envelope does not stop the others.
// The stream stores them in input order (see Submit). When ctx is
// done, the envelopes not yet submitted get an error wrapping ErrPublish
// and ctx.Err(). raws must not be modified until AppendMany returns.
// Every goroutine it starts has returned when it returns.
func (a *Appender) AppendMany(ctx context.Context, space string, raws [][]byte) []ledger.Result {
	results := make([]ledger.Result, len(raws))
	type waiting struct {
		i  int
		pd *Pending
	}
	var fifo []waiting
	wait := func(w waiting) {
		results[w.i], _ = w.pd.Result(ctx)
	}
	submit := func(i int, p *ledger.Prepared, id string, err error) {
		if err != nil {
			results[i] = ledger.Result{ID: id, Err: err}
			return
		}
		for len(fifo) >= a.opts.MaxInFlight {
			wait(fifo[0])
			fifo = fifo[1:]
		}
		pd, err := a.Submit(ctx, p)
		if err != nil {
			results[i] = ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject,
				Err: fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, err)}
			return
		}
		fifo = append(fifo, waiting{i, pd})
	}

	if len(raws) <= prepareChunk {
		for i, raw := range raws {
			p, id, err := a.prepare(space, raw, true)
			submit(i, p, id, err)
		}
	} else {
		// Validation (Decode is most of an append's client-side cost)
		// runs ahead on another goroutine, in input order, a few chunks
		// ahead of submitting: it overlaps with the commit. It prepares
		// every envelope whatever ctx says, so every refusal is reported.
		type prep struct {
			p   *ledger.Prepared
			id  string
			err error
		}
		ahead := make(chan []prep, 4)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ahead)
			for lo := 0; lo < len(raws); lo += prepareChunk {
				c := make([]prep, min(prepareChunk, len(raws)-lo))
				for j := range c {
					c[j].p, c[j].id, c[j].err = a.prepare(space, raws[lo+j], true)
				}
				ahead <- c
			}
		}()
		i := 0
		for c := range ahead {
			for _, x := range c {
				submit(i, x.p, x.id, x.err)
				i++
			}
		}
		wg.Wait()
	}
	for _, w := range fifo {
		wait(w)
	}
	return results
}

// prepareChunk is how many envelopes AppendMany's validation goroutine
// hands over at a time; calls with no more than that validate inline.
const prepareChunk = 64

func (a *Appender) msg(p *ledger.Prepared) *nats.Msg {
	m := &nats.Msg{Subject: p.Subject, Data: p.Raw, Header: nats.Header{}}
	if p.Bridge != "" {
		m.Header.Set(ledger.HeaderBridge, p.Bridge)
		if a.opts.MarkKeys != nil {
			m.Header.Set(ledger.HeaderBridgeSeal, a.opts.MarkKeys.Seal(p.Subject, p.Bridge, p.Raw))
		}
	}
	return m
}

// publishOne publishes p on its own (the committer's fallback), with
// retries, and verifies a duplicate answer. With an Index, p is looked up
// first (its group's lookup may be a while ago) and not published when it
// is known.
func (a *Appender) publishOne(ctx context.Context, p *ledger.Prepared) ledger.Result {
	seq, err := a.known(ctx, p)
	switch {
	case err != nil:
		return lookupFailedResult(p, err)
	case seq != 0:
		return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject, Seq: seq, Duplicate: true}
	}
	r := a.publishRetry(ctx, p, p.MsgID, "")
	return a.verify(ctx, p, r)
}

// publishAs makes one synchronous publish attempt of p under msgID,
// bounded by AckTimeout; clash, when set, is the HeaderMsgIDClash value.
func (a *Appender) publishAs(ctx context.Context, p *ledger.Prepared, msgID, clash string) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.AckTimeout)
	defer cancel()
	m := a.msg(p)
	if clash != "" {
		m.Header.Set(ledger.HeaderMsgIDClash, clash)
	}
	return a.pub.PublishMsg(ctx, m, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(subjects.StreamName))
}

// publishRetry publishes p under msgID, retrying transient failures with
// backoff (the same message and Nats-Msg-Id each time, so the stream
// stores it at most once), and builds the Result.
func (a *Appender) publishRetry(ctx context.Context, p *ledger.Prepared, msgID, clash string) ledger.Result {
	var (
		ack      *jetstream.PubAck
		err      = ctx.Err()
		attempts int
	)
	if err == nil {
		ack, err = a.publishAs(ctx, p, msgID, clash)
		attempts = 1
	}
retry:
	for err != nil && attempts > 0 && attempts <= a.opts.MaxRetries && ctx.Err() == nil && IsTransient(err) {
		wait := backoff(a.opts.RetryWait, attempts)
		wait += rand.N(wait/2 + 1) // jitter: retries of a batch do not arrive together
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			err = fmt.Errorf("%w (after %w)", ctx.Err(), err)
			break retry
		case <-t.C:
		}
		// A retry may come after the stream's duplicate window has
		// forgotten an attempt that was stored: with an Index, p is
		// looked up again first.
		seq, kerr := a.known(ctx, p)
		if kerr != nil {
			err = fmt.Errorf("%w (after %w)", kerr, err)
			break
		}
		if seq != 0 {
			return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject, Attempts: attempts, Seq: seq, Duplicate: true}
		}
		ack, err = a.publishAs(ctx, p, msgID, clash)
		attempts++
	}
	r := ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject, Attempts: attempts}
	switch {
	case err != nil:
		r.Err = fmt.Errorf("%w: envelope %q to %s (%d attempts): %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, attempts, err)
	case ack.Stream != subjects.StreamName: // cannot happen with WithExpectStream
		r.Err = fmt.Errorf("%w: envelope %q: stored in stream %q, not %s", ledger.ErrPublish, p.Decoded.Env.ID, ack.Stream, subjects.StreamName)
	default:
		r.Seq, r.Duplicate = ack.Sequence, ack.Duplicate
	}
	return r
}

// JetStream API error codes that mean "try again shortly".
const (
	errCodeClusterNotAvail  jetstream.ErrorCode = 10008 // JetStream system temporarily unavailable
	errCodeClusterNotLeader jetstream.ErrorCode = 10009 // cluster can not handle request
	// On a cluster, a copy with a Msg-Id whose first copy is still being
	// replicated is answered 409/10158; once it is stored, a retry gets a
	// duplicate ack with the stored sequence.
	errCodeMsgIDInProcess jetstream.ErrorCode = 10158 // duplicate message id is in process
)

// IsTransient reports whether a publish error is worth retrying with the
// same Nats-Msg-Id: no responders (the stream has no leader, e.g. during
// an election), a timeout waiting for the ack, a connection that is
// reconnecting, JetStream saying it is temporarily unavailable, or (on a
// cluster) that the same Msg-Id is still being stored. A
// refusal, a permission error, an oversize message or a stream mismatch is
// not.
func IsTransient(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeClusterNotAvail, errCodeClusterNotLeader, errCodeMsgIDInProcess:
			return true
		}
	}
	return false
}
