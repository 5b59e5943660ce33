package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// warmUp is the start of each repetition left out of the percentiles (the
// projector's first batches, Pebble's first small memtables), unless the
// repetition is too short to spare it.
const warmUp = time.Second

// lagIngestWindow is the most appends awaiting their answers in the
// lagIngest mode: what one streamed NDJSON request keeps in flight.
const lagIngestWindow = 1024

// catchUp bounds the wait for the projection after the last append.
const catchUp = 10 * time.Minute

// lagResult is one repetition of the live lag figure.
type lagResult struct {
	p50, p99 time.Duration
	rate     float64 // achieved append rate
	events   int
}

// measureLag runs the whole ledger (package app: embedded server, fsync on
// every write when syncAlways else every DefaultSyncInterval, projector,
// expirer, submit service, HTTP API) in a fresh directory and appends raws
// at rate events per second for o.Duration: with sync always (lagSync,
// lagIngest), each envelope prepared and submitted to the app's Appender
// (the group commit, as the HTTP and submit paths do) as its time comes;
// otherwise (lagInterval) validated
// by the app's Appender (Prepare, before the clock starts; only its
// subject and Nats-Msg-Id are kept, packed) and published asynchronously
// on the app's connection with its Nats-Msg-Id. At most o.Window are
// unacknowledged. It returns the percentiles of, per event, the
// time its sequence was folded (the store's checkpoint reached it) minus
// the time its acknowledgement arrived, leaving out the first warmUp. A
// sequence folded before its ack was seen counts as 0.
func measureLag(ctx context.Context, o *Options, raws *packed, rate float64, mode lagMode) (lagResult, error) {
	syncAlways := mode != lagInterval
	viaAppender := mode != lagInterval
	n := min(raws.len(), int(rate*o.Duration.Seconds()))
	if n < 1 {
		return lagResult{}, errors.New("bench: lag: no events to append")
	}
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-app-*")
	if err != nil {
		return lagResult{}, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	ao := app.Options{
		DataDir:    dir,
		HTTPAddr:   "127.0.0.1:0",
		NATSListen: "127.0.0.1:-1",
		Logger:     o.Logger,
	}
	if !syncAlways {
		ao.SyncInterval = DefaultSyncInterval
	}
	a, err := app.New(ctx, ao)
	if err != nil {
		return lagResult{}, fmt.Errorf("bench: lag: %w", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(context.WithoutCancel(ctx)) }()
	defer func() {
		_ = a.Close()
		<-runErr
	}()
	select {
	case <-a.Ready():
	case err := <-runErr:
		runErr <- err
		return lagResult{}, fmt.Errorf("bench: lag: app stopped: %w", err)
	case <-ctx.Done():
		return lagResult{}, ctx.Err()
	}
	store := a.Store()
	// What publishing needs of each prepared envelope, packed (see packed).
	var subjs, ids packed
	for i := range n {
		if viaAppender {
			break // prepared as they are submitted
		}
		p, err := a.Appender().Prepare("", raws.at(i))
		if err != nil {
			return lagResult{}, fmt.Errorf("bench: lag: envelope %d refused: %w", i, err)
		}
		subjs.add([]byte(p.Subject))
		ids.add([]byte(p.MsgID))
	}
	js, err := jetstream.New(a.Conn(), jetstream.WithPublishAsyncMaxPending(o.Window))
	if err != nil {
		return lagResult{}, fmt.Errorf("bench: %w", err)
	}
	defer js.CleanupPublisher()

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	// The fold watcher: the time each sequence was committed. The stream
	// is fresh and nothing else appends (no proposal has a deadline), so
	// the appends are sequences 1..n.
	foldAt := make([]time.Time, n+1)
	watchDone := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		for last < uint64(n) {
			if err := store.WaitApplied(ctx, last+1); err != nil {
				watchDone <- err
				return
			}
			now := time.Now()
			s := min(store.AppliedSeq(), uint64(n))
			for q := last + 1; q <= s; q++ {
				foldAt[q] = now
			}
			last = s
		}
		watchDone <- nil
	}()

	// The ack collector: acks arrive in publish order.
	type sent struct {
		i   int
		fut jetstream.PubAckFuture
		pd  *appendlog.Pending // lagIngest
	}
	ackAt := make([]time.Time, n)
	seqOf := make([]uint64, n)
	window := o.Window
	if mode == lagIngest {
		window = lagIngestWindow
	}
	inFlight := make(chan sent, window)
	ackErr := make(chan error, 1)
	acked := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(acked)
		for s := range inFlight {
			if s.pd != nil {
				r, err := s.pd.Result(ctx)
				if err != nil {
					select {
					case ackErr <- fmt.Errorf("append %d: %w", s.i, err):
					default:
					}
					cancel()
					continue
				}
				ackAt[s.i], seqOf[s.i] = time.Now(), r.Seq
				continue
			}
			select {
			case ack := <-s.fut.Ok():
				ackAt[s.i], seqOf[s.i] = time.Now(), ack.Sequence
			case err := <-s.fut.Err():
				select {
				case ackErr <- fmt.Errorf("append %d: %w", s.i, err):
				default:
				}
				cancel()
			case <-ctx.Done():
			}
		}
	}()

	// The pacer.
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	stall := jetstream.WithStallWait(time.Minute)
	var pubErr error
pace:
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > time.Millisecond {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				break pace
			}
		}
		var s sent
		if viaAppender {
			p, err := a.Appender().Prepare("", raws.at(i))
			if err != nil {
				pubErr = fmt.Errorf("envelope %d refused: %w", i, err)
				break
			}
			if s.pd, err = a.Appender().Submit(ctx, p); err != nil {
				pubErr = fmt.Errorf("submit %d: %w", i, err)
				break
			}
		} else {
			m := &nats.Msg{Subject: string(subjs.at(i)), Data: raws.at(i), Header: nats.Header{}}
			fut, err := js.PublishMsgAsync(m, jetstream.WithMsgID(string(ids.at(i))), jetstream.WithExpectStream(subjects.StreamName), stall)
			if err != nil {
				pubErr = fmt.Errorf("publish %d: %w", i, err)
				break
			}
			s.fut = fut
		}
		s.i = i
		select {
		case inFlight <- s:
		case <-ctx.Done():
			break pace
		}
	}
	close(inFlight)
	if pubErr != nil {
		return lagResult{}, fmt.Errorf("bench: lag: %w", pubErr)
	}
	select {
	case err := <-watchDone:
		if err != nil {
			select {
			case e := <-ackErr:
				err = e
			default:
			}
			return lagResult{}, fmt.Errorf("bench: lag: %w", err)
		}
	case <-time.After(catchUp):
		return lagResult{}, fmt.Errorf("bench: lag: the projection did not catch up within %v (applied %d of %d)", catchUp, store.AppliedSeq(), n)
	}
	select {
	case <-acked:
	case <-time.After(time.Minute):
		return lagResult{}, errors.New("bench: lag: acknowledgements missing a minute after the projection caught up")
	}
	select {
	case err := <-ackErr:
		return lagResult{}, fmt.Errorf("bench: lag: %w", err)
	default:
	}
	var last time.Time
	lags := make([]time.Duration, 0, n)
	warm := start.Add(warmUp)
	for i := range n {
		if seqOf[i] < 1 || seqOf[i] > uint64(n) {
			return lagResult{}, fmt.Errorf("bench: lag: append %d acknowledged at seq %d, want 1..%d", i, seqOf[i], n)
		}
		if ackAt[i].After(warm) || o.Duration <= 2*warmUp {
			lags = append(lags, max(0, foldAt[seqOf[i]].Sub(ackAt[i])))
		}
		if ackAt[i].After(last) {
			last = ackAt[i]
		}
	}
	return lagResult{
		p50:    durQuantile(lags, 0.50),
		p99:    durQuantile(lags, 0.99),
		rate:   float64(n) / last.Sub(start).Seconds(),
		events: n,
	}, nil
}
