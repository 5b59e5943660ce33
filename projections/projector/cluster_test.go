package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// Figures of TestClusterLeaderLossUnderLoad.
const (
	clusterPublishers = 4
	clusterPerPub     = 5000 // 20,000 envelopes in all
	clusterChunk      = 250  // envelopes per AppendMany call
)

// ackLog collects every acknowledged append of the load.
type ackLog struct {
	mu       sync.Mutex
	seqOf    map[string]uint64 // envelope id -> acked seq
	idAt     map[uint64]string // acked seq -> envelope id
	failed   map[string]error  // never acknowledged (may or may not be stored)
	conflict []string
	copyErrs []error      // failures of copies of an acknowledged envelope
	acked    atomic.Int64 // results with a seq (first copies and duplicates)
	dups     int
	retries  int
	chunks   []time.Time // when each AppendMany call returned with an ack
}

func (l *ackLog) add(res []ledger.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range res {
		l.retries += max(r.Attempts-1, 0)
		if r.Err != nil {
			if _, ok := l.seqOf[r.ID]; !ok {
				l.failed[r.ID] = r.Err
			} else {
				l.copyErrs = append(l.copyErrs, r.Err)
			}
			continue
		}
		delete(l.failed, r.ID) // an exact copy was acknowledged
		if r.Duplicate {
			l.dups++
		}
		if s, ok := l.seqOf[r.ID]; ok && s != r.Seq {
			l.conflict = append(l.conflict, fmt.Sprintf("envelope %q acked at seq %d and at seq %d", r.ID, s, r.Seq))
		}
		if id, ok := l.idAt[r.Seq]; ok && id != r.ID {
			l.conflict = append(l.conflict, fmt.Sprintf("seq %d acked for %q and for %q", r.Seq, id, r.ID))
		}
		l.seqOf[r.ID], l.idAt[r.Seq] = r.Seq, r.ID
		l.acked.Add(1)
	}
	l.chunks = append(l.chunks, time.Now())
}

// resumedAfter returns how long after t the first AppendMany call
// returned: the append pause a publisher saw around t.
func (l *ackLog) resumedAfter(t time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.chunks {
		if c.After(t) {
			return c.Sub(t)
		}
	}
	return -1
}

// stallMeter records the longest pause between a projector's commits.
type stallMeter struct {
	mu    sync.Mutex
	last  time.Time
	worst time.Duration
	at    uint64 // first seq after the worst pause
}

func (m *stallMeter) batch(b projections.BatchInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if !m.last.IsZero() && now.Sub(m.last) > m.worst {
		m.worst, m.at = now.Sub(m.last), b.FirstSeq
	}
	m.last = now
}

func (m *stallMeter) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("longest pause %v (before seq %d)", m.worst.Round(time.Millisecond), m.at)
}

// clusterURLs returns the client URLs of the running nodes, starting with
// node first.
func clusterURLs(nodes []*natsserver.Server, first int) string {
	var urls []string
	for i := range nodes {
		if n := nodes[(first+i)%len(nodes)]; n != nil {
			urls = append(urls, n.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// clusterConn connects to the cluster, preferring node first, reconnecting
// for ever (the test bounds it).
func clusterConn(t *testing.T, nodes []*natsserver.Server, first int) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return natstest.ConnectURL(t, clusterURLs(nodes, first), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0))
}

// streamLeader returns the LEDGER stream's leader and whether every
// replica is current, asking with a short timeout.
func streamLeader(ctx context.Context, js jetstream.JetStream) (leader string, current bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return "", false, err
	}
	ci := st.CachedInfo().Cluster
	if ci == nil {
		return "", false, fmt.Errorf("no cluster info")
	}
	current = ci.Leader != "" && len(ci.Replicas) == 2
	for _, r := range ci.Replicas {
		current = current && r.Current && !r.Offline
	}
	return ci.Leader, current, nil
}

// poll calls f every 20ms until it returns true; it fails the test with
// what() when the test's whole context ends first (testctx.Whole: a loaded
// machine can take far longer than a quiet one to elect a leader).
func poll(t *testing.T, f func() bool, what func() string) {
	t.Helper()
	ctx := testctx.Whole(t)
	for !f() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s (%v)", what(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestClusterLeaderLossUnderLoad: three in-process nats-servers form a
// JetStream cluster, LEDGER runs at R3, four publishers (each its own
// connection to a different node) append 20,000 workload envelopes with
// AppendMany, and the stream leader is shut down midway and restarted
// later. Afterwards every acknowledged envelope is in the stream exactly
// once at the sequence it was acknowledged with, and two projectors
// (distinct durables, each its own Pebble) that followed the cluster
// throughout are complete and equal, byte for byte, to a rebuild.
func TestClusterLeaderLossUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: 20,000 appends on a 3-node cluster")
	}
	t0 := time.Now()
	nodes := natstest.StartCluster(t, 3)
	opts := make([]natsserver.Options, len(nodes))
	for i, n := range nodes {
		opts[i] = n.Options()
	}
	t.Logf("cluster up in %v", time.Since(t0).Round(time.Millisecond))
	// A 3-node cluster, 20,000 appends and a leader election under the
	// race detector: on a loaded machine this takes minutes; bounded by
	// the test binary's deadline, not a fixed figure.
	ctx := testctx.Whole(t)

	_, admin := clusterConn(t, nodes, 0)
	if _, err := appendlog.EnsureStream(ctx, admin, appendlog.StreamOptions{Replicas: 3}); err != nil {
		t.Fatalf("EnsureStream R3: %v", err)
	}
	poll(t, func() bool {
		_, cur, err := streamLeader(ctx, admin)
		return err == nil && cur
	}, func() string { return "LEDGER R3 has no leader with two current replicas" })

	// Two projectors follow the cluster from the start, each with its own
	// durable and its own Pebble.
	var stores []*projections.Store
	var stalls []*stallMeter
	for i, durable := range []string{"projector-a", "projector-b"} {
		_, js := clusterConn(t, nodes, 1+i)
		s := openStore(t, filepath.Join(t.TempDir(), durable))
		m := &stallMeter{}
		runProjector(t, js, s, projector.Options{Durable: durable, Logger: natstest.Logger(t), OnBatch: m.batch})
		stores, stalls = append(stores, s), append(stalls, m)
	}

	// The load: four publishers, each its own connection to a different
	// node and its own Appender, AppendMany in chunks.
	acks := &ackLog{seqOf: map[string]uint64{}, idAt: map[uint64]string{}, failed: map[string]error{}}
	var wg sync.WaitGroup
	pubErr := make(chan error, clusterPublishers)
	loadStart := time.Now()
	for p := range clusterPublishers {
		_, js := clusterConn(t, nodes, p%len(nodes))
		app, err := appendlog.NewAppender(js, appendlog.AppenderOptions{}) // default ack timeout and retries
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(app.Close)
		g := workload.New(workload.Options{Seed: int64(p + 1), Prefix: fmt.Sprintf("w%d-", p), Disorder: 5, Duplicates: 3, Foreign: 10,
			Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent := 0; sent < clusterPerPub; sent += clusterChunk {
				if ctx.Err() != nil {
					pubErr <- fmt.Errorf("publisher %d: %w after %d envelopes", p, ctx.Err(), sent)
					return
				}
				acks.add(app.AppendMany(ctx, "", g.Batch(clusterChunk)))
			}
		}()
	}
	loadDone := make(chan struct{})
	go func() { wg.Wait(); close(loadDone) }()

	// Midway: shut the stream leader down, time the election, keep going,
	// then restart the node while the load goes on.
	poll(t, func() bool { return acks.acked.Load() >= clusterPublishers*clusterPerPub/2 },
		func() string { return fmt.Sprintf("only %d appends acknowledged", acks.acked.Load()) })
	// A stream info request can time out on a loaded machine (1 s each):
	// asked again until it answers.
	var oldLeader string
	poll(t, func() bool {
		l, _, err := streamLeader(ctx, admin)
		oldLeader = l
		return err == nil && l != ""
	}, func() string { return "no stream leader reported" })
	victim := slices.IndexFunc(opts, func(o natsserver.Options) bool { return o.ServerName == oldLeader })
	if victim < 0 {
		t.Fatalf("leader %q is not one of the nodes", oldLeader)
	}
	ackedAtKill := acks.acked.Load()
	killAt := time.Now()
	nodes[victim].Shutdown()
	var newLeader string
	poll(t, func() bool {
		l, _, err := streamLeader(ctx, admin)
		if err == nil && l != "" && l != oldLeader {
			newLeader = l
			return true
		}
		return false
	}, func() string { return fmt.Sprintf("no new stream leader after %s was shut down", oldLeader) })
	election := time.Since(killAt)
	poll(t, func() bool { return acks.acked.Load() > ackedAtKill+clusterChunk },
		func() string { return "appends did not resume after the election" })
	restartAt := time.Now()
	nodes[victim] = natstest.StartWith(t, opts[victim])

	select {
	case <-loadDone:
	case <-ctx.Done():
		t.Fatalf("load not done: %d acknowledged", acks.acked.Load())
	}
	loadTime := time.Since(loadStart)
	close(pubErr)
	for err := range pubErr {
		t.Error(err)
	}
	poll(t, func() bool {
		_, cur, err := streamLeader(ctx, admin)
		return err == nil && cur
	}, func() string { return fmt.Sprintf("restarted %s not current again", oldLeader) })
	catchUp := time.Since(restartAt)

	// Every acknowledged envelope is in the stream exactly once, at the
	// sequence it was acknowledged with.
	for _, c := range acks.conflict {
		t.Error(c)
	}
	st, err := admin.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	state := st.CachedInfo().State
	if state.FirstSeq != 1 || state.Msgs != state.LastSeq || state.NumDeleted != 0 {
		t.Fatalf("stream state %+v: not a gapless log", state)
	}
	seqsOf := map[string][]uint64{}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := oc.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= state.LastSeq; seq++ {
		m, err := it.Next()
		if err != nil {
			t.Fatalf("read back seq %d: %v", seq, err)
		}
		md, _ := m.Metadata()
		if md.Sequence.Stream != seq {
			t.Fatalf("read back: seq %d, want %d", md.Sequence.Stream, seq)
		}
		var e struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(m.Data(), &e); err != nil || e.ID == "" {
			t.Fatalf("seq %d: not an envelope: %v", seq, err)
		}
		seqsOf[e.ID] = append(seqsOf[e.ID], seq)
	}
	it.Stop()
	acks.mu.Lock()
	lost, twice, moved := 0, 0, 0
	for id, seq := range acks.seqOf {
		got := seqsOf[id]
		switch {
		case len(got) == 0:
			lost++
			t.Errorf("acknowledged envelope %q (seq %d) is not in the stream", id, seq)
		case len(got) > 1:
			twice++
			t.Errorf("acknowledged envelope %q stored %d times, at %v", id, len(got), got)
		case got[0] != seq:
			moved++
			t.Errorf("envelope %q acknowledged at seq %d but stored at %d", id, seq, got[0])
		}
	}
	unackedStored := 0
	for id := range seqsOf {
		if _, ok := acks.seqOf[id]; !ok {
			unackedStored++
			if _, failed := acks.failed[id]; !failed {
				t.Errorf("envelope %q is in the stream but was never appended", id)
			}
		}
		if n := len(seqsOf[id]); n > 1 {
			t.Errorf("envelope %q stored %d times: %v", id, n, seqsOf[id])
		}
	}
	distinct, acked, dups, retries, failed := len(acks.seqOf), acks.acked.Load(), acks.dups, acks.retries, len(acks.failed)
	// A copy of an envelope published while the first copy is still being
	// replicated is answered "duplicate message id is in process" (JetStream
	// 10158) on a cluster; the copy is not stored twice (checked above).
	copyErrs := len(acks.copyErrs)
	if copyErrs > 0 {
		t.Logf("%d copies of acknowledged envelopes were refused, e.g. %v", copyErrs, acks.copyErrs[0])
	}
	shown := 0
	for id, err := range acks.failed {
		if shown++; shown <= 3 {
			t.Logf("not acknowledged (allowed: the appender gave up): %s: %v", id, err)
		}
	}
	acks.mu.Unlock()
	if lost+twice+moved > 0 {
		t.Fatalf("%d acknowledged envelopes lost, %d stored twice, %d at another seq", lost, twice, moved)
	}

	// The projections followed the cluster through the failover: complete,
	// identical to each other and to a rebuild in a fresh store.
	// The rebuild runs while the projectors catch up.
	foldStart := time.Now()
	rebuilt := openStore(t, filepath.Join(t.TempDir(), "rebuild"))
	rebuildDone := make(chan error, 1)
	var rebuildTime time.Duration
	rctx, rcancel := context.WithCancel(testctx.Whole(t))
	defer rcancel()
	go func() {
		_, err := projector.Rebuild(rctx, admin, rebuilt, projector.RebuildOptions{})
		rebuildTime = time.Since(foldStart)
		rebuildDone <- err
	}()
	for _, s := range stores {
		waitApplied(t, s, state.LastSeq)
	}
	foldWait := time.Since(foldStart)
	if err := <-rebuildDone; err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if got := rebuilt.AppliedSeq(); got != state.LastSeq {
		t.Fatalf("rebuild reached seq %d, want %d", got, state.LastSeq)
	}
	requireSameStore(t, stores[0], rebuilt)
	requireSameStore(t, stores[1], rebuilt)

	t.Logf("load: %d publishers × %d envelopes = %d appends in %v (%.0f acks/s): %d acknowledged (%d distinct envelopes; %d answered duplicate, i.e. stored by an earlier attempt, with its seq), %d copies refused as in process (10158), %d retries, %d not acknowledged (%d of those stored anyway)",
		clusterPublishers, clusterPerPub, clusterPublishers*clusterPerPub, loadTime.Round(time.Millisecond), float64(acked)/loadTime.Seconds(),
		acked, distinct, dups, copyErrs, retries, failed, unackedStored)
	t.Logf("failover: stream leader %s shut down after %d acks; new leader %s elected in %v; first AppendMany returned %v after the shutdown; %s restarted and current again %v later",
		oldLeader, ackedAtKill, newLeader, election.Round(time.Millisecond), acks.resumedAfter(killAt).Round(time.Millisecond), oldLeader, catchUp.Round(time.Millisecond))
	t.Logf("stream: %d messages, seqs 1..%d, no gaps, every acknowledged envelope once at its acked seq; projectors caught up %v after the load (projector-a %v, projector-b %v) and equal a rebuild (%v); total %v",
		state.Msgs, state.LastSeq, foldWait.Round(time.Millisecond), stalls[0], stalls[1], rebuildTime.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}
