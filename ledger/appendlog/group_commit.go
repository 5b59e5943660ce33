package appendlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mewledger/ledger/ledger"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/mewledger/ledger/subjects"
)

// Group commit defaults (contract §4), chosen by measurement on a 2-core
// machine with sync_interval always (README, "Group commit").
const (
	// DefaultMaxBatch is the most envelopes one atomic batch carries: the
	// server's own limit (max_batch_size, 1000). nats-server stages every
	// atomic batch of a single-replica stream in a file store it creates,
	// fsyncs and removes, a cost per batch whatever its size: measured
	// (ledger bench --only ingest --ingest-events 30000 --ingest-batch N,
	// raw atomic batches, sync always, loaded 2-core machine), 256 a batch
	// gave 6.4–11.5k messages/s, 500 10–14k, 1000 14–19k, with 1 or 4
	// batches in flight alike. A committer that is not kept full sends
	// smaller groups anyway.
	DefaultMaxBatch = maxServerBatch
	// DefaultMaxBatchBytes bounds a batch's payload bytes. A batch always
	// takes at least one envelope, however big.
	DefaultMaxBatchBytes = 4 << 20
	// DefaultBatchesInFlight is how many batches may be sent and not yet
	// resolved. nats-server allows 50 open atomic batches per stream and
	// 1000 per server (max_batch_inflight_per_stream, _total); it stages
	// and commits one stream's batches one at a time, so more in flight
	// saves the client's round trip and the gaps of the path feeding the
	// committer, not the server's work. Measured (README, "Group
	// commit"): the ingest figure's median ratio 0.53 with 1, 0.59 with
	// 2, 0.69 with 4.
	DefaultBatchesInFlight = 4
	// DefaultLinger is how long a group waits for more envelopes, only
	// under concurrent load: when one of the previous two groups was an
	// atomic batch and this one is still smaller than it. A lone caller
	// never waits. Callers that each wait for their own answer (HTTP
	// agents) come back together, a few milliseconds apart; without it
	// the first back left alone and the callers split into cohorts that
	// each paid a commit. Measured with the agents figure: 2 ms gave
	// groups of 26 of 32 agents, 5 ms 28–30.
	DefaultLinger = 5 * time.Millisecond
	// DefaultMinAtomic is the smallest group written as an atomic batch;
	// a smaller one is published as plain messages, pipelined on the
	// connection. Measured on one node with sync always: an atomic batch
	// costs 8–11 ms up to ~32 envelopes (nats-server stages an R1 batch in
	// a temporary file store it creates, fsyncs and removes), a plain
	// message one fsync, 0.4–1 ms on this machine's shared disk: the
	// break-even is 8–25 envelopes.
	DefaultMinAtomic = 16
	// maxServerBatch is nats-server's default max_batch_size.
	maxServerBatch = 1000
)

// JetStream atomic batch headers (nats-server ≥ 2.12, ADR-50).
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// NeverAtomic as CommitOptions.MinAtomic publishes every group as plain
// pipelined messages: the choice for a stream whose server does not fsync
// each write (sync_interval other than always), where an atomic batch
// saves no fsync and costs the server's staging of the batch (measured:
// the bench's append figure at sync_interval 2m, ratio to raw PublishAsync
// 0.36 with atomic batches, 0.79 without; at sync always, 5.26 with and
// 1.25 without).
const NeverAtomic = maxServerBatch + 1

// CommitOptionsForSync returns the commit options for a stream whose
// server fsyncs every syncInterval (0: every write, "always"): atomic
// batches when each write is synced, plain pipelined messages otherwise.
// syncKnown false (an external server whose setting the ledger cannot
// read) keeps the defaults: atomic batches.
func CommitOptionsForSync(syncInterval time.Duration, syncKnown bool) CommitOptions {
	if syncKnown && syncInterval > 0 {
		return CommitOptions{MinAtomic: NeverAtomic}
	}
	return CommitOptions{}
}

// CommitOptions bound the group commit of an Appender. Zero fields take
// their defaults.
type CommitOptions struct {
	// MaxBatch is the most envelopes in one atomic batch (1..1000).
	// Default DefaultMaxBatch. 1 turns batching off (every envelope is
	// published on its own, still through the committer's ordering).
	MaxBatch int
	// MaxBatchBytes bounds a batch's payload. Default DefaultMaxBatchBytes.
	MaxBatchBytes int
	// MinAtomic is the smallest group of envelopes written as one atomic
	// batch; smaller groups are published as plain messages, still in
	// order on one connection. Default (0): measured — the committer
	// times both paths and sends a group atomically when its plain
	// messages would cost more than a small atomic batch (see
	// commit_cost.go), starting from DefaultMinAtomic. Any other value is
	// fixed; 1 makes every group atomic.
	MinAtomic int
	// measured: MinAtomic was left to the committer's measurement.
	measured bool
	// Linger is how long a group waits for more envelopes under
	// concurrent load (see DefaultLinger). Default DefaultLinger;
	// negative means never.
	Linger time.Duration
	// BatchesInFlight is how many batches may await their commit ack at
	// once (1..50). Default DefaultBatchesInFlight. Batches leave in
	// acceptance order on one connection and callers are answered in
	// that order whatever this is; with more than one, a batch that has
	// to be redone (a duplicate member, a lost ack) is stored after
	// batches accepted later. A group smaller than MinAtomic never
	// overtakes: it waits, growing, until nothing else is in flight.
	BatchesInFlight int
	// Queue is how many accepted envelopes may wait for a batch; Submit
	// blocks while it is full. Default 2 × MaxBatch × BatchesInFlight.
	Queue int
}

// Validate fills in defaults and checks the options.
func (o *CommitOptions) Validate() error {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.MinAtomic == 0 {
		o.MinAtomic, o.measured = DefaultMinAtomic, true
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger // negative stays: never
	}
	if o.BatchesInFlight == 0 {
		o.BatchesInFlight = DefaultBatchesInFlight
	}
	if o.Queue == 0 {
		o.Queue = 2 * o.MaxBatch * o.BatchesInFlight
	}
	switch {
	case o.MaxBatch < 1 || o.MaxBatch > maxServerBatch:
		return fmt.Errorf("%w: Commit.MaxBatch %d, want 1..%d", ErrAppenderOptions, o.MaxBatch, maxServerBatch)
	case o.MinAtomic < 1:
		return fmt.Errorf("%w: Commit.MinAtomic %d, want ≥ 1", ErrAppenderOptions, o.MinAtomic)
	case o.MaxBatchBytes < 1:
		return fmt.Errorf("%w: Commit.MaxBatchBytes %d, want ≥ 1", ErrAppenderOptions, o.MaxBatchBytes)
	case o.BatchesInFlight < 1 || o.BatchesInFlight > 50:
		return fmt.Errorf("%w: Commit.BatchesInFlight %d, want 1..50", ErrAppenderOptions, o.BatchesInFlight)
	case o.Queue < 1:
		return fmt.Errorf("%w: Commit.Queue %d, want ≥ 1", ErrAppenderOptions, o.Queue)
	}
	return nil
}

// ErrClosed is wrapped by the error of an append submitted to, or still
// waiting in, a closed Appender.
var ErrClosed = errors.New("ledger: appender closed")

// Pending is an accepted append whose acknowledgement is on its way.
type Pending struct {
	p    *ledger.Prepared
	done chan struct{}
	res  ledger.Result
	// known is the sequence the Index says p was first stored at (0: not
	// known; p is published); kres is its answer, once verified.
	known uint64
	kres  ledger.Result
	// follows: an envelope with p's Nats-Msg-Id and subject this
	// committer sent in an earlier batch (committer_recent.go): p is not
	// published and is answered from it. entry: what later ones follow.
	follows, entry *sentEntry
}

// isKnown reports whether pd is answered without being published.
func (pd *Pending) isKnown() bool { return pd.known != 0 || pd.follows != nil }

// Done is closed when Result is ready.
func (pd *Pending) Done() <-chan struct{} { return pd.done }

// Result waits for the append's outcome (or ctx) and returns it, as
// AppendPrepared does. The error is Result.Err. When ctx ends first, the
// append may still be stored; the Result then wraps ErrPublish and
// ctx.Err().
func (pd *Pending) Result(ctx context.Context) (ledger.Result, error) {
	select {
	case <-pd.done:
	default:
		select {
		case <-pd.done:
		case <-ctx.Done():
			r := ledger.Result{ID: pd.p.Decoded.Env.ID, Subject: pd.p.Subject,
				Err: fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, pd.p.Decoded.Env.ID, pd.p.Subject, ctx.Err())}
			return r, r.Err
		}
	}
	return pd.res, pd.res.Err
}

// batch is one atomic batch: its members in acceptance order.
type batch struct {
	id    string
	items []*Pending
	reply chan *nats.Msg // the commit's answer (cap 1)
	err   error          // a send error: the batch's outcome is unknown
	solo  bool           // one envelope sent recently: published on its own
	sent  time.Time      // when it was sent: its acks are awaited until sent + AckTimeout
	plain bool           // fewer than MinAtomic: plain messages, one reply each
	keys  []string       // plain: each member's key in waiting
	// With an Index: the members it knows are not published. items is
	// then what is published; all is every member in acceptance order
	// (set only when some are known), next how far along all they have
	// been resolved. lookupErr: the group could not be looked up (the log
	// could not be read); nothing of it is published.
	all       []*Pending
	known     int
	next      int
	lookupErr error
}

// groupCommitter gathers submitted appends into JetStream atomic batches
// (contract §4, group commit). One goroutine (gather) takes envelopes in
// acceptance order, forms batches and publishes them in that order on
// one connection, so the stream stores them in that order; another
// (complete) awaits the batches' commit acks in the same order and
// resolves every member, so callers are acknowledged in acceptance order.
type groupCommitter struct {
	a        *Appender
	nc       *nats.Conn
	o        CommitOptions
	in       chan *Pending
	window   chan struct{} // batches in flight
	freed    chan struct{} // a batch was resolved (cap 1)
	out      chan *batch   // sent, awaiting their acks, in order
	inbox    string        // reply subject prefix of commits
	carry    *Pending      // gather's: the first of the next batch
	recent   recentIDs     // gather's: Nats-Msg-Ids sent lately
	sent     *sentMemo     // the envelopes sent lately, by Nats-Msg-Id (committer_recent.go)
	lastSize [2]int        // gather's: the sizes of the last two groups sent
	cost     *costModel    // the measured threshold (nil: MinAtomic is fixed)
	lastDone time.Time     // complete's: when the last group was resolved
	sub      *nats.Subscription

	// gather's, for the Index lookups (stored.go): buffers reused from
	// group to group.
	ids  []ledger.Identity
	ps   []*ledger.Prepared
	seqs []uint64

	mu      sync.Mutex
	waiting map[string]chan *nats.Msg // batch id → reply

	batches, envelopes, plain, fallbacks, known, recentDups, resent atomic.Int64

	// onResolve, when set (by tests, before any Submit), is called with
	// each Pending just before it is resolved.
	onResolve func(*Pending)

	stop      chan struct{}
	life      context.Context // cancelled by close
	endLife   context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

func newGroupCommitter(a *Appender, nc *nats.Conn, o CommitOptions) (*groupCommitter, error) {
	c := &groupCommitter{
		a: a, nc: nc, o: o,
		in:      make(chan *Pending, o.Queue),
		recent:  newRecentIDs(recentIDsCap),
		sent:    newSentMemo(recentIDsCap),
		window:  make(chan struct{}, o.BatchesInFlight),
		freed:   make(chan struct{}, 1),
		out:     make(chan *batch, o.BatchesInFlight),
		inbox:   nc.NewInbox(),
		waiting: map[string]chan *nats.Msg{},
		stop:    make(chan struct{}),
	}
	if o.measured {
		c.cost = newCostModel(o.MinAtomic)
	}
	c.life, c.endLife = context.WithCancel(context.Background())
	sub, err := nc.Subscribe(c.inbox+".*", c.onReply)
	if err != nil {
		c.endLife()
		return nil, fmt.Errorf("ledger: appender: commit replies: %w", err)
	}
	c.sub = sub
	c.wg.Add(2)
	go c.gather()
	go c.complete()
	return c, nil
}

// close stops the committer: envelopes not yet sent fail with ErrClosed;
// batches sent are awaited (bounded by AckTimeout). Safe twice.
func (c *groupCommitter) close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.endLife()
		c.wg.Wait()
		_ = c.sub.Unsubscribe()
	})
}

func (c *groupCommitter) onReply(m *nats.Msg) {
	id := m.Subject[len(c.inbox)+1:]
	c.mu.Lock()
	ch := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- m // cap 1, one reply per batch
	}
}

// submit queues p; it blocks while the queue is full.
func (c *groupCommitter) submit(ctx context.Context, p *ledger.Prepared) (*Pending, error) {
	pd := &Pending{p: p, done: make(chan struct{})}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-c.stop:
		return nil, ErrClosed
	default:
	}
	select {
	case c.in <- pd:
		return pd, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stop:
		return nil, ErrClosed
	}
}

// gather forms batches in acceptance order and sends them.
func (c *groupCommitter) gather() {
	defer c.wg.Done()
	defer close(c.out)
	for {
		first := c.carry
		c.carry = nil
		if first == nil {
			select {
			case first = <-c.in:
			case <-c.stop:
				c.failQueued()
				return
			}
		}
		// Take a window slot first: while every slot is busy, envelopes
		// pile up in the queue and leave together in the next batch.
		select {
		case c.window <- struct{}{}:
		case <-c.stop:
			c.resolve(first, c.closedResult(first.p))
			c.failQueued()
			return
		}
		b := &batch{items: []*Pending{first}}
		size := len(first.p.Raw)
		// An envelope this committer sent recently is probably a
		// duplicate, which would make the server refuse its whole batch:
		// it goes in a batch of its own. So does one whose Nats-Msg-Id is
		// already in the batch being formed.
		// One it sent in an earlier batch (the same Nats-Msg-Id and
		// subject) follows that one: not published, answered from it.
		solo := false
		if first.follows = c.follower(first); first.follows == nil {
			solo = c.recent.has(first.p.MsgID)
			c.recent.add(first.p.MsgID)
		}
		add := func(pd *Pending) (full bool) {
			if pd.follows = c.follower(pd); pd.follows != nil {
				b.items = append(b.items, pd)
				return false
			}
			if c.recent.has(pd.p.MsgID) {
				c.carry = pd
				return true
			}
			c.recent.add(pd.p.MsgID)
			b.items = append(b.items, pd)
			size += len(pd.p.Raw)
			return size >= c.o.MaxBatchBytes
		}
		// Under concurrent load (one of the previous two groups was an
		// atomic batch), a group that has not yet reached the larger of
		// their sizes waits up to Linger for the rest: callers that each
		// wait for their answer come back together, and the first to come
		// back would otherwise leave alone, costing an fsync of its own. A
		// lone caller (the previous groups were small) never lingers.
		want := 0
		minAtomic := c.minAtomic()
		if last := max(c.lastSize[0], c.lastSize[1]); last >= minAtomic {
			want = min(last, c.o.MaxBatch)
		}
		var (
			linger  <-chan time.Time
			timer   *time.Timer
			lingerd bool // the linger has run out
		)
	fill:
		for !solo && len(b.items) < c.o.MaxBatch {
			select {
			case pd := <-c.in:
				if add(pd) {
					break fill
				}
				continue
			default:
			}
			// The queue is empty. A group too small for an atomic batch,
			// or smaller than the last groups under load, does not
			// overtake the batches in flight: it waits for them (growing
			// meanwhile). A small group's plain messages would cost the
			// server an fsync each ahead of them; and callers that wait
			// for their answers would split into cohorts each paying a
			// commit (an R1 atomic batch costs about the same for 16
			// envelopes as for 32). Unless no group is ever atomic:
			// NeverAtomic pipelines plain groups.
			small := c.o.MinAtomic <= c.o.MaxBatch && len(b.items) < max(minAtomic, want) && len(c.window) > 1
			lingering := !lingerd && c.o.Linger > 0 && len(b.items) < want
			if !small && !lingering {
				break
			}
			if lingering && timer == nil {
				timer = time.NewTimer(c.o.Linger)
				linger = timer.C
			}
			select {
			case pd := <-c.in:
				if add(pd) {
					break fill
				}
			case <-c.freed: // a batch resolved: look again
			case <-linger:
				lingerd, linger = true, nil
			case <-c.stop:
				break fill
			}
		}
		if timer != nil {
			timer.Stop()
		}
		if b.solo = solo; !solo {
			c.splitFollowers(b)
			c.lastSize = [2]int{len(b.items), c.lastSize[0]}
			if c.a.opts.Index != nil && len(b.items) > 0 {
				c.lookup(b)
			}
			if b.lookupErr == nil {
				c.remember(b)
				if len(b.items) > 0 {
					c.send(b)
				}
			}
		} else {
			c.remember(b)
		}
		c.out <- b
	}
}

// failQueued answers every queued envelope with ErrClosed.
func (c *groupCommitter) failQueued() {
	if c.carry != nil {
		c.resolve(c.carry, c.closedResult(c.carry.p))
		c.carry = nil
	}
	for {
		select {
		case pd := <-c.in:
			c.resolve(pd, c.closedResult(pd.p))
		default:
			return
		}
	}
}

func (c *groupCommitter) closedResult(p *ledger.Prepared) ledger.Result {
	return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject,
		Err: fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, ErrClosed)}
}

// send publishes b's members with the atomic batch headers, the last one
// with the commit header and a reply subject. A single envelope is
// published as a batch of one too: the reply path is the same.
func (c *groupCommitter) send(b *batch) {
	b.id = nuid.Next()
	b.sent = time.Now()
	n := len(b.items)
	if !c.atomicGroup(n) {
		c.sendPlain(b)
		return
	}
	b.reply = make(chan *nats.Msg, 1)
	c.mu.Lock()
	c.waiting[b.id] = b.reply
	c.mu.Unlock()
	for i, pd := range b.items {
		m := c.a.msg(pd.p)
		m.Header.Set(jetstream.MsgIDHeader, pd.p.MsgID)
		m.Header.Set(jetstream.ExpectedStreamHeader, subjects.StreamName)
		m.Header.Set(headerBatchID, b.id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i == n-1 {
			m.Header.Set(headerBatchCommit, "1")
			m.Reply = c.inbox + "." + b.id
		}
		if err := c.nc.PublishMsg(m); err != nil {
			b.err = err
			c.mu.Lock()
			delete(c.waiting, b.id)
			c.mu.Unlock()
			return
		}
	}
}

// minAtomic is the smallest group sent as an atomic batch now.
func (c *groupCommitter) minAtomic() int {
	if c.cost == nil {
		return c.o.MinAtomic
	}
	return c.cost.threshold()
}

// atomicGroup reports whether a group of n goes as one atomic batch.
func (c *groupCommitter) atomicGroup(n int) bool {
	if c.cost == nil || c.o.MaxBatch == 1 {
		return n >= c.o.MinAtomic
	}
	return c.cost.atomic(n)
}

// measure records b's service time (from when it was sent, or when the
// group before it was resolved if later, until now) with the cost model
// when b was stored cleanly from its acks.
func (c *groupCommitter) measure(b *batch, clean bool) {
	now := time.Now()
	start := b.sent
	if c.lastDone.After(start) {
		start = c.lastDone
	}
	c.lastDone = now
	if c.cost == nil || !clean || b.solo || b.known > 0 || len(b.items) == 0 {
		return
	}
	if b.plain {
		c.cost.observePlain(len(b.items), now.Sub(start))
	} else {
		c.cost.observeBatch(len(b.items), now.Sub(start))
	}
}

// ackWait is how long b's acks are still awaited: AckTimeout from when it
// was sent, so that batches sent together and lost together (a cut
// connection) time out together, not one AckTimeout after another.
func (c *groupCommitter) ackWait(b *batch) time.Duration {
	return max(time.Until(b.sent.Add(c.a.opts.AckTimeout)), time.Millisecond)
}

// batchAck is a commit's answer.
type batchAck struct {
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Batch  string              `json:"batch"`
	Count  int                 `json:"count"`
	Error  *jetstream.APIError `json:"error,omitempty"`
}

// complete awaits the batches in the order they were sent and resolves
// their members.
func (c *groupCommitter) complete() {
	defer c.wg.Done()
	for b := range c.out {
		c.measure(b, c.finish(b))
		<-c.window
		select {
		case c.freed <- struct{}{}:
		default:
		}
	}
}

// await waits for b's commit ack (bounded by AckTimeout) and checks it.
func (c *groupCommitter) await(b *batch) (batchAck, error) {
	var ack batchAck
	if b.err != nil {
		return ack, b.err
	}
	var err error
	t := time.NewTimer(c.ackWait(b))
	select {
	case m := <-b.reply:
		t.Stop()
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			err = nats.ErrNoResponders // no stream to answer
		} else if jerr := json.Unmarshal(m.Data, &ack); jerr != nil {
			err = fmt.Errorf("%w: %w", jetstream.ErrInvalidJSAck, jerr)
		} else if ack.Error != nil {
			err = ack.Error
		}
	case <-t.C:
		err = nats.ErrTimeout
	}
	c.mu.Lock()
	delete(c.waiting, b.id)
	c.mu.Unlock()
	n := len(b.items)
	if err == nil && (ack.Stream != subjects.StreamName || ack.Count != n || ack.Seq < uint64(n)) {
		err = fmt.Errorf("%w: batch ack %+v for %d envelopes", jetstream.ErrInvalidJSAck, ack, n)
	}
	return ack, err
}

// stored resolves the members of a batch stored with ack.
func (c *groupCommitter) stored(b *batch, ack batchAck, attempts int) {
	c.batches.Add(1)
	c.envelopes.Add(int64(len(b.items)))
	first := ack.Seq - uint64(len(b.items)) + 1
	for i, pd := range b.items {
		c.resolveIn(b, pd, ledger.Result{ID: pd.p.Decoded.Env.ID, Subject: pd.p.Subject, Attempts: attempts, Seq: first + uint64(i)})
	}
}

// finish resolves b's members: from the commit ack when the batch was
// stored, else through recover. clean: every member was stored from the
// group's own acks (no fallback, no duplicate).
func (c *groupCommitter) finish(b *batch) (clean bool) {
	if b.lookupErr != nil {
		for _, pd := range b.items {
			c.resolve(pd, lookupFailedResult(pd.p, b.lookupErr))
		}
		return false
	}
	if b.known > 0 {
		c.confirmKnown(b)
		defer c.flushKnown(b, nil) // those after the last published member
		if len(b.items) == 0 {
			return false
		}
	}
	if b.plain {
		return c.finishPlain(b, 1)
	}
	if b.solo {
		ctx, cancel := c.ctx()
		defer cancel()
		r := c.a.publishOne(ctx, b.items[0].p)
		c.resolve(b.items[0], r)
		return false
	}
	ack, err := c.await(b)
	if err == nil {
		c.stored(b, ack, 1)
		return true
	}
	c.fallbacks.Add(1)
	ctx, cancel := c.ctx()
	defer cancel()
	c.flushKnown(b, nil) // recover answers the others in its own order
	c.recover(ctx, b.items, err, 1, []string{b.id})
	return false
}

// recover stores, in order, the members of a batch that was not
// acknowledged as stored (err says why). When a member's Nats-Msg-Id was
// a duplicate (the server refuses the whole batch without saying which),
// the batch is halved and each half committed again in order, down to
// single envelopes: a duplicate costs about 2·log2(n) commits, and its
// batch-mates are still stored in batches. Any other failure (a lost
// connection or ack, a timeout: the batch may or may not be stored) has
// every member published one by one under its own Nats-Msg-Id
// (publishOne): what the batch stored is answered as a duplicate, what
// it did not is stored, so nothing is stored twice and nothing is
// acknowledged that was not stored.
//
// sentAs are the atomic batches items were sent in whose outcome is
// unknown: a duplicate answer naming a message one of them stored (its
// Nats-Batch-Id header) is this append's own first copy, answered as
// stored (sentBefore), not as a duplicate.
func (c *groupCommitter) recover(ctx context.Context, items []*Pending, err error, attempts int, sentAs []string) {
	if len(items) > 1 && isBatchDuplicate(err) && ctx.Err() == nil {
		h := len(items) / 2
		for _, half := range [][]*Pending{items[:h], items[h:]} {
			b := &batch{items: half}
			c.send(b)
			if b.plain { // small: plain messages, each answered
				c.finishPlain(b, attempts+1)
				continue
			}
			ack, err := c.await(b)
			if err == nil {
				c.stored(b, ack, attempts+1)
				continue
			}
			sent := sentAs
			if !isBatchDuplicate(err) { // refused whole: stored nothing
				sent = append(slices.Clip(sentAs), b.id)
			}
			c.recover(ctx, half, err, attempts+1, sent)
		}
		return
	}
	if c.a.opts.MaxRetries < 0 && !isBatchDuplicate(err) {
		// No retries wanted: the batch's error is every member's.
		for _, pd := range items {
			c.resolve(pd, ledger.Result{ID: pd.p.Decoded.Env.ID, Subject: pd.p.Subject, Attempts: attempts,
				Err: fmt.Errorf("%w: envelope %q to %s (%d attempts): %w", ledger.ErrPublish, pd.p.Decoded.Env.ID, pd.p.Subject, attempts, err)})
		}
		return
	}
	for _, pd := range items {
		r := c.a.publishOne(ctx, pd.p)
		r.Attempts += attempts
		if r.Err == nil && r.Duplicate && len(sentAs) > 0 {
			r = c.sentBefore(ctx, r, sentAs)
		}
		c.resolve(pd, r)
	}
}

// sentBefore answers r, a duplicate, as stored (Duplicate false, the
// same sequence) when the message at r.Seq was stored by one of the
// atomic batches sentAs (its Nats-Batch-Id header): the copy the log
// holds is this very append's, sent before its ack was lost or late.
// When the message cannot be read, r stands (the envelope is stored at
// r.Seq either way).
func (c *groupCommitter) sentBefore(ctx context.Context, r ledger.Result, sentAs []string) ledger.Result {
	st, err := c.a.streamHandle(ctx)
	if err != nil {
		return r
	}
	gctx, cancel := context.WithTimeout(ctx, c.a.opts.AckTimeout)
	defer cancel()
	m, err := st.GetMsg(gctx, r.Seq)
	if err != nil {
		return r
	}
	if id := m.Header.Get(headerBatchID); id != "" && slices.Contains(sentAs, id) {
		c.resent.Add(1)
		r.Duplicate = false
	}
	return r
}

// errCodeBatchDuplicate is nats-server's "atomic publish batch contains
// duplicate message id".
const errCodeBatchDuplicate jetstream.ErrorCode = 10201

func isBatchDuplicate(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchDuplicate
}

// ctx is cancelled when the committer stops.
func (c *groupCommitter) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (c *groupCommitter) resolve(pd *Pending, r ledger.Result) {
	if c.onResolve != nil {
		c.onResolve(pd)
	}
	if pd.entry != nil && r.Err == nil {
		pd.entry.seq = r.Seq
	}
	pd.res = r
	close(pd.done)
}

// CommitStats counts what an Appender's committer did.
type CommitStats struct {
	// Batches is the number of atomic batches stored, Envelopes the
	// envelopes they carried.
	Batches, Envelopes int64
	// Plain is the number of envelopes stored as plain messages, in
	// groups smaller than CommitOptions.MinAtomic.
	Plain int64
	// Fallbacks is the number of batches that were not acknowledged as
	// stored (a duplicate member, a lost connection, a timeout) and whose
	// members were therefore committed again in smaller batches or one
	// by one.
	Fallbacks int64
	// Known is the number of envelopes the Index knew as stored (looked
	// up with their group, or on their own before a fallback publish or a
	// retry): not published again, answered as duplicates (those the
	// log answered for a lagging Index included).
	Known int64
	// Recent is the number of envelopes answered duplicate from an
	// envelope with the same Nats-Msg-Id and subject this committer had
	// sent in an earlier batch and stored (committer_recent.go): neither
	// published nor looked up.
	Recent int64
	// Resent is the number of envelopes of a batch given up on (its ack
	// lost or late) sent again and answered duplicate of the copy that
	// batch had stored after all: answered stored, as they were.
	Resent int64
	// LogLookups is the number of lookups (a group, or one envelope)
	// the Index could not vouch for (behind the log, or unable to answer)
	// that were looked up in the log itself.
	LogLookups int64
	// MinAtomic is the smallest group the committer now sends as an
	// atomic batch (measured, unless CommitOptions.MinAtomic fixed it).
	MinAtomic int
}

// CommitStats returns the committer's counters so far.
func (a *Appender) CommitStats() CommitStats {
	return CommitStats{Batches: a.c.batches.Load(), Envelopes: a.c.envelopes.Load(), Plain: a.c.plain.Load(), Fallbacks: a.c.fallbacks.Load(), Known: a.c.known.Load(), Recent: a.c.recentDups.Load(), Resent: a.c.resent.Load(), LogLookups: a.logLookups.Load(), MinAtomic: a.c.minAtomic()}
}

// recentIDsCap is how many recently sent Nats-Msg-Ids the committer
// remembers (about 2 MiB).
const recentIDsCap = 16384

// recentIDs is a set of the last n strings added (a ring and a map of
// counts).
type recentIDs struct {
	ring []string
	next int
	n    map[string]int
}

func newRecentIDs(n int) recentIDs {
	return recentIDs{ring: make([]string, n), n: make(map[string]int, n)}
}

func (r *recentIDs) has(id string) bool { return r.n[id] > 0 }

func (r *recentIDs) add(id string) {
	if old := r.ring[r.next]; old != "" {
		if r.n[old]--; r.n[old] == 0 {
			delete(r.n, old)
		}
	}
	r.ring[r.next] = id
	r.n[id]++
	r.next = (r.next + 1) % len(r.ring)
}

// sendPlain publishes b's members as plain messages, each with its
// Nats-Msg-Id and its own reply subject (<inbox>.<batch id>-<index>).
func (c *groupCommitter) sendPlain(b *batch) {
	b.plain = true
	n := len(b.items)
	b.reply = make(chan *nats.Msg, n)
	b.keys = make([]string, n)
	c.mu.Lock()
	for i := range n {
		b.keys[i] = b.id + "-" + strconv.Itoa(i)
		c.waiting[b.keys[i]] = b.reply
	}
	c.mu.Unlock()
	for i, pd := range b.items {
		m := c.a.msg(pd.p)
		m.Header.Set(jetstream.MsgIDHeader, pd.p.MsgID)
		m.Header.Set(jetstream.ExpectedStreamHeader, subjects.StreamName)
		m.Reply = c.inbox + "." + b.keys[i]
		if err := c.nc.PublishMsg(m); err != nil {
			b.err = err
			break
		}
	}
}

// finishPlain resolves the members of a plain group from their acks: a
// duplicate is verified; a member without a good ack (a send error, a
// timeout, an error answer) is published again on its own (publishOne).
// clean: every member was stored from its own ack, none a duplicate.
func (c *groupCommitter) finishPlain(b *batch, attempts int) (clean bool) {
	clean = true
	n := len(b.items)
	acks := make([]*nats.Msg, n)
	if b.err == nil {
		t := time.NewTimer(c.ackWait(b))
	collect:
		for got := 0; got < n; {
			select {
			case m := <-b.reply:
				sfx := m.Subject[len(c.inbox)+1+len(b.id)+1:]
				if i, err := strconv.Atoi(sfx); err == nil && i >= 0 && i < n && acks[i] == nil {
					acks[i] = m
					got++
				}
			case <-t.C:
				break collect
			}
		}
		t.Stop()
	}
	c.mu.Lock()
	for _, k := range b.keys {
		delete(c.waiting, k)
	}
	c.mu.Unlock()
	// The context of fallbacks and duplicate checks, made only when one
	// is needed (most groups need none).
	var (
		fctx   context.Context
		cancel context.CancelFunc
	)
	ctxFor := func() context.Context {
		if fctx == nil {
			fctx, cancel = c.ctx()
		}
		return fctx
	}
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	for i, pd := range b.items {
		var ack struct {
			Stream    string              `json:"stream"`
			Seq       uint64              `json:"seq"`
			Duplicate bool                `json:"duplicate"`
			Error     *jetstream.APIError `json:"error"`
		}
		if acks[i] == nil || json.Unmarshal(acks[i].Data, &ack) != nil || ack.Error != nil || ack.Stream != subjects.StreamName || ack.Seq == 0 {
			c.fallbacks.Add(1)
			clean = false
			if c.a.opts.MaxRetries < 0 { // no retries wanted
				err := b.err
				switch {
				case err != nil:
				case acks[i] == nil:
					err = nats.ErrTimeout
				case acks[i].Header.Get("Status") == "503":
					err = nats.ErrNoResponders
				case ack.Error != nil:
					err = ack.Error
				default:
					err = fmt.Errorf("%w: %q", jetstream.ErrInvalidJSAck, acks[i].Data)
				}
				c.resolveIn(b, pd, ledger.Result{ID: pd.p.Decoded.Env.ID, Subject: pd.p.Subject, Attempts: attempts,
					Err: fmt.Errorf("%w: envelope %q to %s (%d attempts): %w", ledger.ErrPublish, pd.p.Decoded.Env.ID, pd.p.Subject, attempts, err)})
				continue
			}
			r := c.a.publishOne(ctxFor(), pd.p)
			r.Attempts += attempts
			c.resolveIn(b, pd, r)
			continue
		}
		r := ledger.Result{ID: pd.p.Decoded.Env.ID, Subject: pd.p.Subject, Attempts: attempts, Seq: ack.Seq, Duplicate: ack.Duplicate}
		if r.Duplicate {
			clean = false
			r = c.a.verify(ctxFor(), pd.p, r)
		} else {
			c.plain.Add(1)
		}
		c.resolveIn(b, pd, r)
	}
	return clean
}
