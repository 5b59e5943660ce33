package appendlog_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/crashrig"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// storedMsg is one message read back from the stream.
type storedMsg struct {
	seq   uint64
	msgID string
	data  []byte
}

// readStream reads every message of LEDGER in order with an ordered
// consumer.
func readStream(t *testing.T, js jetstream.JetStream) []storedMsg {
	t.Helper()
	ctx := ctxT(t)
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []storedMsg
	for uint64(len(out)) < info.State.Msgs {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, storedMsg{seq: md.Sequence.Stream, msgID: m.Headers().Get(jetstream.MsgIDHeader), data: m.Data()})
			n++
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("read %d of %d messages, then nothing", len(out), info.State.Msgs)
		}
	}
	return out
}

// waitMsgs waits until the stream holds at least n messages, bounded by
// the test's context (ctxT), not a fixed few seconds: a loaded machine
// can take long.
func waitMsgs(t *testing.T, st jetstream.Stream, n uint64, stop <-chan struct{}) bool {
	t.Helper()
	ctx := ctxT(t)
	for streamMsgs(t, st) < n {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			t.Fatalf("stream did not reach %d messages (holds %d): %v", n, streamMsgs(t, st), ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return true
}

// proxied starts a server (fsync in the background when fast), the LEDGER
// stream, a lossy proxy in front of it, and a connection through the
// proxy that reconnects at once.
func proxied(t *testing.T, fast bool) (direct jetstream.JetStream, st jetstream.Stream, px *crashrig.Proxy, viaProxy jetstream.JetStream) {
	t.Helper()
	o := natstest.Options(t)
	if fast {
		o.SyncInterval = time.Minute
	}
	srv := natstest.StartWith(t, o)
	_, direct = natstest.Connect(t, srv)
	st, err := appendlog.EnsureStream(ctxT(t), direct, appendlog.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	px, err = crashrig.StartProxy(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	_, viaProxy = natstest.ConnectURL(t, px.URL(), nats.ReconnectWait(10*time.Millisecond), nats.MaxReconnects(-1),
		nats.ReconnectJitter(0, 0), nats.Timeout(2*time.Second))
	return direct, st, px, viaProxy
}

// TestRetryLostAckStoredOnce: the envelope reaches the stream, its ack is
// lost with the connection; the Appender retries the same message with the
// same Nats-Msg-Id on the new connection and learns it was stored: one
// copy, the first copy's sequence, Duplicate set.
func TestRetryLostAckStoredOnce(t *testing.T) {
	_, st, px, js := proxied(t, false)
	a := newAppender(t, js, appendlog.AppenderOptions{AckTimeout: 300 * time.Millisecond, MaxRetries: 8, RetryWait: 20 * time.Millisecond})
	raw := tProposal("lost-ack-1", "alice").raw()

	px.Hold()
	done := make(chan ledger.Result, 1)
	go func() {
		r, _ := a.Append(context.Background(), "", raw)
		done <- r
	}()
	waitMsgs(t, st, 1, nil) // stored, ack held back
	loseAcks(t, px, a)      // ack lost with the connection, and not answered after the reconnect
	r := <-done
	if r.Err != nil {
		t.Fatalf("append: %v", r.Err)
	}
	// The batch's commit ack is lost; the committer publishes the
	// envelope again on its own and learns it was stored.
	if r.Attempts < 2 || !r.Duplicate || r.Seq != 1 {
		t.Fatalf("result %+v, want a retry answered as a duplicate of seq 1", r)
	}
	if s := a.CommitStats(); s.Fallbacks != 1 {
		t.Fatalf("commit stats %+v, want one fallback", s)
	}
	if n := streamMsgs(t, st); n != 1 {
		t.Fatalf("stream holds %d copies", n)
	}
}

// TestRetryConcurrentPublishersUnderLostAcks: several publishers append
// with async acks (AppendMany) while the connection loses acks again and
// again (hold until something was stored, then cut). Every append ends
// acknowledged, and the stream holds every envelope exactly once.
func TestRetryConcurrentPublishersUnderLostAcks(t *testing.T) {
	const publishers, perPublisher = 4, 400
	direct, st, px, js := proxied(t, true)
	a := newAppender(t, js, appendlog.AppenderOptions{AckTimeout: 250 * time.Millisecond, MaxRetries: 10, RetryWait: 20 * time.Millisecond, MaxInFlight: 64})

	batches := make([][][]byte, publishers)
	for i := range batches {
		g := workload.New(workload.Options{Seed: int64(100 + i), Prefix: string(rune('A'+i)) + "-", Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10}})
		batches[i] = g.Batch(perPublisher)
	}
	results := make([][]ledger.Result, publishers)
	var wg sync.WaitGroup
	var running, appRetries atomic.Int32
	stop := make(chan struct{})
	for i := range publishers {
		wg.Add(1)
		running.Add(1)
		go func() {
			defer wg.Done()
			defer running.Add(-1)
			// In slices, so that lost acks fall in the middle of the run.
			for off := 0; off < perPublisher; off += 50 {
				rs := a.AppendMany(context.Background(), "", batches[i][off:off+50])
				// What the Appender gave up on, the publisher appends
				// again: same bytes, same Nats-Msg-Id.
				for j := range rs {
					for k := 0; rs[j].Err != nil && k < 5; k++ {
						again, _ := a.Append(context.Background(), "", batches[i][off+j])
						again.Attempts += rs[j].Attempts
						rs[j] = again
						appRetries.Add(1)
					}
				}
				results[i] = append(results[i], rs...)
			}
		}()
	}
	go func() { wg.Wait(); close(stop) }()

	// Chaos: hold acks until at least one more envelope is stored, then
	// cut every connection.
	cycles := 0
	r := rand.New(rand.NewPCG(7, 7))
chaos:
	for running.Load() > 0 && cycles < 6 {
		before := streamMsgs(t, st)
		px.Hold()
		// Until a new envelope is stored while its ack is held, for at
		// most 300ms (all in flight may be retries of stored ones).
		for deadline := time.Now().Add(300 * time.Millisecond); streamMsgs(t, st) == before && time.Now().Before(deadline); {
			select {
			case <-stop:
				px.Cut()
				break chaos
			case <-time.After(2 * time.Millisecond):
			}
		}
		px.Cut()
		cycles++
		time.Sleep(time.Duration(30+r.IntN(50)) * time.Millisecond)
	}
	<-stop

	retried, dups := 0, 0
	want := map[string]bool{}
	for i, rs := range results {
		if len(rs) != perPublisher {
			t.Fatalf("publisher %d: %d results", i, len(rs))
		}
		for j, res := range rs {
			if res.Err != nil {
				t.Fatalf("publisher %d envelope %d: %v", i, j, res.Err)
			}
			if res.Attempts > 1 {
				retried++
			}
			if res.Duplicate {
				dups++
			}
			want[res.ID] = true
		}
	}
	stored := readStream(t, direct)
	seenMsgID := map[string]uint64{}
	seenID := map[string]uint64{}
	for _, m := range stored {
		if prev, ok := seenMsgID[m.msgID]; ok {
			t.Errorf("Nats-Msg-Id %q stored at seq %d and %d", m.msgID, prev, m.seq)
		}
		seenMsgID[m.msgID] = m.seq
		d, err := ledger.Decode(m.data, ledger.DecodeOptions{})
		if err != nil {
			t.Fatalf("seq %d: %v", m.seq, err)
		}
		if prev, ok := seenID[d.Env.ID]; ok {
			t.Errorf("envelope %q stored at seq %d and %d", d.Env.ID, prev, m.seq)
		}
		seenID[d.Env.ID] = m.seq
	}
	for id := range want {
		if _, ok := seenID[id]; !ok {
			t.Errorf("acknowledged envelope %q is not in the stream", id)
		}
	}
	if len(stored) != len(want) {
		t.Errorf("stream holds %d messages for %d envelopes", len(stored), len(want))
	}
	if cycles == 0 || retried == 0 {
		t.Fatalf("no lost ack happened (cycles %d, retried %d): the test proved nothing", cycles, retried)
	}
	t.Logf("%d envelopes from %d publishers, %d ack-loss cycles (%d connections cut): %d appends retried by the Appender, %d more by the publisher, %d answered as duplicates; stored once each",
		len(want), publishers, cycles, px.Cuts(), retried, appRetries.Load(), dups)
}

// TestConcurrentSamePublish: the same prepared message published by many
// goroutines at once is stored once; exactly one publish stored it, the
// others are told it is a duplicate of the same sequence.
func TestConcurrentSamePublish(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	st, err := appendlog.EnsureStream(ctxT(t), js, appendlog.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(t, js, appendlog.AppenderOptions{})
	p, err := a.Prepare("", tProposal("twice", "alice").raw())
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	res := make([]ledger.Result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], _ = a.AppendPrepared(context.Background(), p)
		}()
	}
	close(start)
	wg.Wait()
	firsts := 0
	for _, r := range res {
		if r.Err != nil || r.Seq != 1 {
			t.Fatalf("result %+v", r)
		}
		if !r.Duplicate {
			firsts++
		}
	}
	if firsts != 1 {
		t.Fatalf("%d publishes say they stored it, want 1", firsts)
	}
	if m := streamMsgs(t, st); m != 1 {
		t.Fatalf("stream holds %d copies", m)
	}
}
