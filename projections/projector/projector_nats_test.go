package projector_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// rig is a real JetStream server with the LEDGER stream and an appender.
type rig struct {
	js  jetstream.JetStream
	app *appendlog.Appender
}

func newRig(t *testing.T) *rig {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(testctx.Whole(t))
	defer cancel()
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	app, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	return &rig{js: js, app: app}
}

// appendAll appends raws and returns the highest sequence acknowledged.
func (r *rig) appendAll(t *testing.T, raws [][]byte) uint64 {
	t.Helper()
	ctx, cancel := context.WithCancel(testctx.Whole(t))
	defer cancel()
	var last uint64
	for i, res := range r.app.AppendMany(ctx, "", raws) {
		if res.Err != nil {
			t.Fatalf("append %d (%s): %v", i, raws[i], res.Err)
		}
		last = max(last, res.Seq)
	}
	return last
}

func openStore(t *testing.T, dir string) *projections.Store {
	t.Helper()
	s, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runProjector runs a projector until the returned stop function is called;
// stop waits for Run to return and fails the test on a Run error.
func runProjector(t *testing.T, js jetstream.JetStream, s *projections.Store, o projector.Options) (stop func()) {
	t.Helper()
	p, err := projector.New(js, s, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("projector: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitApplied(t *testing.T, s *projections.Store, seq uint64) {
	t.Helper()
	if err := s.WaitApplied(testctx.Whole(t), seq); err != nil {
		t.Fatalf("projection did not reach seq %d (at %d): %v", seq, s.AppliedSeq(), err)
	}
}

func dump(t *testing.T, s *projections.Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rebuildInto folds the whole stream into a fresh store and returns it.
func rebuildInto(t *testing.T, js jetstream.JetStream) *projections.Store {
	t.Helper()
	s := openStore(t, filepath.Join(t.TempDir(), "rebuild"))
	ctx, cancel := context.WithCancel(testctx.Whole(t))
	defer cancel()
	if _, err := projector.Rebuild(ctx, js, s, projector.RebuildOptions{BatchSize: 333}); err != nil {
		t.Fatal(err)
	}
	return s
}

func requireSameStore(t *testing.T, live, other *projections.Store) {
	t.Helper()
	a, b := dump(t, live), dump(t, other)
	if !bytes.Equal(a, b) {
		t.Fatalf("stores differ: live %d bytes (checkpoint %d), other %d bytes (checkpoint %d)\nfirst difference at byte %d",
			len(a), live.AppliedSeq(), len(b), other.AppliedSeq(), firstDiff(a, b))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

var golden = [][]byte{
	[]byte(`{"protocol":"mew/v0.4","id":"env-req-1","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`),
	[]byte(`{"protocol":"mew/v0.4","id":"env-fulfill-1","from":"human-user","to":["target-agent"],"kind":"mcp/request","correlation_id":["env-req-1"],"payload":{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`),
	[]byte(`{"protocol":"mew/v0.4","id":"env-resp-1","from":"target-agent","kind":"mcp/response","correlation_id":["env-fulfill-1"],"payload":{"result":{"ok":true}}}`),
}

// TestProjectorPublishToState: publish -> projector -> state, and the live
// projection equals a rebuild of the same log in a fresh store.
func TestProjectorPublishToState(t *testing.T) {
	r := newRig(t)
	live := openStore(t, t.TempDir())
	runProjector(t, r.js, live, projector.Options{})

	last := r.appendAll(t, golden)
	g := workload.New(workload.Options{Seed: 1, Disorder: 5, Duplicates: 3, Foreign: 20, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	last = max(last, r.appendAll(t, g.Batch(3000)))
	waitApplied(t, live, last)

	p, err := live.Get("default", "env-req-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.StateFulfilled || p.DecidedEvent != "env-fulfill-1" || p.Fulfillments[0].Outcome != "succeeded" || p.Events != 3 {
		t.Fatalf("golden proposal: %+v", p)
	}
	h, err := live.History("default", "env-req-1")
	if err != nil || len(h) != 3 || h[2].Effect != api.EffectApplied {
		t.Fatalf("golden history: %v %+v", err, h)
	}
	// The fold is a pure function of the log: a rebuild in a fresh store
	// is byte-for-byte the live projection.
	requireSameStore(t, live, rebuildInto(t, r.js))
}

// TestProjectorRestartMidStream stops the projector repeatedly while events
// are being appended (and reopens its store), then checks that the result
// equals one uninterrupted fold: no event skipped, none applied twice.
func TestProjectorRestartMidStream(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	g := workload.New(workload.Options{Seed: 7, Disorder: 10, Duplicates: 5, Foreign: 10, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})

	var last uint64
	for round := range 5 {
		s, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		stop := runProjector(t, r.js, s, projector.Options{BatchSize: 37})
		last = max(last, r.appendAll(t, g.Batch(800)))
		// Stop at an arbitrary point: after some, not all, of this round.
		waitApplied(t, s, last-uint64(100*round))
		stop()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := openStore(t, dir)
	runProjector(t, r.js, s, projector.Options{BatchSize: 37})
	waitApplied(t, s, last)
	requireSameStore(t, s, rebuildInto(t, r.js))

	// History entries account for every stored event exactly once: each
	// event writes one entry per proposal it names, so total entries are
	// at least the number of events and equal the fold's own count.
	st, err := s.Stats("default")
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != int64(last) {
		t.Fatalf("stats count %d events, the stream holds %d", st.Events, last)
	}
}

// TestTwoStoresFoldIdentically: the same log folded into two fresh stores,
// with different batch sizes, gives identical contents.
func TestTwoStoresFoldIdentically(t *testing.T) {
	r := newRig(t)
	g := workload.New(workload.Options{Seed: 3, Disorder: 15, Duplicates: 5, Foreign: 30, Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	last := r.appendAll(t, g.Batch(2000))
	a := openStore(t, t.TempDir())
	b := openStore(t, t.TempDir())
	stopA := runProjector(t, r.js, a, projector.Options{Durable: "a", BatchSize: 1})
	stopB := runProjector(t, r.js, b, projector.Options{Durable: "b", BatchSize: 1000})
	waitApplied(t, a, last)
	waitApplied(t, b, last)
	stopA()
	stopB()
	requireSameStore(t, a, b)
}

// TestPipelinedRebuildEqualsLiveProjector: Rebuild folds each batch while
// the one before it commits, the next batch reading the handed-off writes;
// at batch sizes from 1 (every read of a follow-up crosses the pending
// batch) to 1000, over a log with orphans, duplicates and foreign
// withdrawals, it ends byte-identical to the live projector (which
// pipelines its batches the same way, at batch size 100).
func TestPipelinedRebuildEqualsLiveProjector(t *testing.T) {
	r := newRig(t)
	g := workload.New(workload.Options{Seed: 11, Disorder: 15, Duplicates: 5, Foreign: 30, Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	last := r.appendAll(t, g.Batch(1500))
	live := openStore(t, t.TempDir())
	stop := runProjector(t, r.js, live, projector.Options{Durable: "live", BatchSize: 100})
	waitApplied(t, live, last)
	stop()
	for _, size := range []int{1, 7, 1000} {
		s := openStore(t, t.TempDir())
		ctx, cancel := context.WithCancel(testctx.Whole(t))
		n, err := projector.Rebuild(ctx, r.js, s, projector.RebuildOptions{BatchSize: size})
		cancel()
		if err != nil || n != last || s.AppliedSeq() != last {
			t.Fatalf("batch size %d: rebuild returned %d, %v, checkpoint %d; want %d", size, n, err, s.AppliedSeq(), last)
		}
		requireSameStore(t, live, s)
	}
}

// TestExpirerExpiresPendingProposal: a proposal with ttl_ms left pending is
// expired by the ledger's own ledger/expire event, written once.
func TestExpirerExpiresPendingProposal(t *testing.T) {
	r := newRig(t)
	s := openStore(t, t.TempDir())
	runProjector(t, r.js, s, projector.Options{})
	last := r.appendAll(t, [][]byte{
		[]byte(`{"protocol":"mew/v0.4","id":"short","from":"a","kind":"mcp/proposal","payload":{"method":"m","ttl_ms":300}}`),
		[]byte(`{"protocol":"mew/v0.4","id":"long","from":"a","kind":"mcp/proposal","payload":{"method":"m","ttl_ms":3600000}}`),
	})
	waitApplied(t, s, last)

	ex, err := projector.NewExpirer(s, r.app, projector.ExpirerOptions{Interval: 50 * time.Millisecond, Grace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The expiry is appended at seq last+1; wait for the fold.
	waitApplied(t, s, last+1)
	p, err := s.Get("default", "short")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.StateExpired || p.DecidedEvent != ledger.ExpireID("default", "short") || p.DecidedBy != ledger.LedgerSender {
		t.Fatalf("short: %+v", p)
	}
	if p, _ := s.Get("default", "long"); p.State != api.StatePending {
		t.Fatalf("long: %s", p.State)
	}
	// A second expirer (another ledger process) writes nothing new: the
	// id is deterministic and the proposal is no longer pending.
	ex2, _ := projector.NewExpirer(s, r.app, projector.ExpirerOptions{Grace: 10 * time.Millisecond})
	if n, err := ex2.Scan(context.Background()); err != nil || n != 0 {
		t.Fatalf("second expirer appended %d (%v)", n, err)
	}
}

// TestRebuildBeyondLog: asking for a sequence after the end is a clear
// error, not a silent partial answer.
func TestRebuildBeyondLog(t *testing.T) {
	r := newRig(t)
	last := r.appendAll(t, golden)
	s := openStore(t, t.TempDir())
	_, err := projector.Rebuild(context.Background(), r.js, s, projector.RebuildOptions{UpToSeq: last + 10})
	if !errors.Is(err, projector.ErrBeyondLog) {
		t.Fatalf("err = %v, want ErrBeyondLog", err)
	}
	n, err := projector.Rebuild(context.Background(), r.js, s, projector.RebuildOptions{UpToSeq: 2})
	if err != nil || n != 2 || s.AppliedSeq() != 2 {
		t.Fatalf("rebuild to 2: n=%d err=%v applied=%d", n, err, s.AppliedSeq())
	}
	if p, _ := s.Get("default", "env-req-1"); p.State != api.StateFulfilled || p.Fulfillments[0].Outcome != "" {
		t.Fatalf("as of seq 2: %+v", p)
	}
}

// TestProjectorPauseHoldsEvents: after Pause, events appended are not
// folded (the checkpoint holds) until Resume, and then all are.
func TestProjectorPauseHoldsEvents(t *testing.T) {
	r := newRig(t)
	s := openStore(t, t.TempDir())
	p, err := projector.New(r.js, s, projector.Options{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	first := r.appendAll(t, golden)
	waitApplied(t, s, first)
	p.Pause()
	if !p.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	g := workload.New(workload.Options{Seed: 11})
	last := r.appendAll(t, g.Batch(200))
	// The projector is idle and waiting for messages when they arrive: a
	// held event must not be folded. Give it every chance to (bounded).
	held := time.After(500 * time.Millisecond)
	for wait := true; wait; {
		select {
		case <-held:
			wait = false
		default:
			if got := s.AppliedSeq(); got != first {
				t.Fatalf("paused projector folded up to %d (paused at %d)", got, first)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := s.Get("default", "env-req-1"); err != nil {
		t.Fatalf("reads must answer while paused: %v", err)
	}
	// What was committed is acknowledged while paused too: acks do not
	// wait for Resume (a pause longer than AckWait would redeliver).
	c, err := r.js.Consumer(context.Background(), subjects.StreamName, projector.DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	if ci, err := c.Info(context.Background()); err != nil || ci.AckFloor.Stream != first {
		t.Fatalf("ack floor while paused: %+v, %v; want %d (the checkpoint)", ci.AckFloor, err, first)
	}
	p.Resume()
	waitApplied(t, s, last)
}

// TestRebuildCancelledAndResumed cancels a rebuild after its first commit
// (its reader stage is then blocked reading ahead): Rebuild returns
// ctx.Err() with the checkpoint at the last whole batch, and a second
// Rebuild from there ends byte-identical to a rebuild in one go.
func TestRebuildCancelledAndResumed(t *testing.T) {
	r := newRig(t)
	g := workload.New(workload.Options{Seed: 5})
	last := r.appendAll(t, g.Batch(1500))
	s := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := projector.Rebuild(ctx, r.js, s, projector.RebuildOptions{
		BatchSize: 100,
		Progress:  func(done, total uint64) { cancel() },
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled rebuild: err = %v, want context.Canceled", err)
	}
	if got != s.AppliedSeq() || got == 0 || got%100 != 0 || got >= last {
		t.Fatalf("cancelled rebuild returned %d, checkpoint %d: want the same whole batch, short of %d", got, s.AppliedSeq(), last)
	}
	if n, err := projector.Rebuild(context.Background(), r.js, s, projector.RebuildOptions{BatchSize: 100}); err != nil || n != last {
		t.Fatalf("resumed rebuild: %d, %v; want %d", n, err, last)
	}
	requireSameStore(t, rebuildInto(t, r.js), s)
}
