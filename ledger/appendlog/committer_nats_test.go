package appendlog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/testkit/crashrig"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// TestGroupCommitConcurrentAppenders: many goroutines append one envelope
// at a time; each gets its own sequence, the message stored there is its
// envelope, and every envelope went through an atomic batch.
func TestGroupCommitConcurrentAppenders(t *testing.T) {
	const appenders, each = 32, 40
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})

	raws := make([][][]byte, appenders)
	results := make([][]ledger.Result, appenders)
	var wg sync.WaitGroup
	for g := range appenders {
		raws[g] = make([][]byte, each)
		results[g] = make([]ledger.Result, each)
		for i := range each {
			raws[g][i] = tProposal(fmt.Sprintf("g%d-%d", g, i), "alice").raw()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				results[g][i], _ = a.Append(ctx, "", raws[g][i])
			}
		}()
	}
	wg.Wait()

	seen := map[uint64]string{}
	for g := range appenders {
		var last uint64
		for i, r := range results[g] {
			if r.Err != nil || r.Duplicate || r.Seq == 0 {
				t.Fatalf("appender %d, envelope %d: %+v", g, i, r)
			}
			if r.Seq <= last { // one goroutine's appends are stored in its order
				t.Fatalf("appender %d, envelope %d: seq %d after %d", g, i, r.Seq, last)
			}
			last = r.Seq
			if other, ok := seen[r.Seq]; ok {
				t.Fatalf("seq %d answered to %s and %s", r.Seq, other, r.ID)
			}
			seen[r.Seq] = r.ID
			m, err := st.GetMsg(ctx, r.Seq)
			if err != nil || string(m.Data) != string(raws[g][i]) {
				t.Fatalf("seq %d does not hold %s: %v", r.Seq, r.ID, err)
			}
		}
	}
	if n := streamMsgs(t, st); n != appenders*each {
		t.Fatalf("stream holds %d messages, want %d", n, appenders*each)
	}
	s := a.CommitStats()
	if s.Envelopes+s.Plain != appenders*each || s.Fallbacks != 0 || s.Batches == 0 {
		t.Fatalf("commit stats %+v", s)
	}
	t.Logf("%d envelopes in %d atomic batches, %d as plain messages", s.Envelopes, s.Batches, s.Plain)
}

// TestGroupCommitDuplicateInMiddle: a batch whose middle member was
// stored before (by another process: this Appender does not know it) is
// refused whole by the server; the others are stored, in order, and the
// member is answered as a verified duplicate of the first copy.
func TestGroupCommitDuplicateInMiddle(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	const n = 101
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(idf("mid", i), "bob").raw()
	}
	first := newAppender(t, js, appendlog.AppenderOptions{})
	if r := mustAppend(t, first, "", raws[50]); r.Seq != 1 {
		t.Fatalf("first copy: %+v", r)
	}

	// One batch in flight: the stream stores every other envelope in
	// acceptance order even though a batch had to be redone.
	a := newAppender(t, js, appendlog.AppenderOptions{Commit: appendlog.CommitOptions{MaxBatch: 1000, BatchesInFlight: 1}})
	rs := a.AppendMany(ctx, "", raws)
	want := uint64(2)
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("envelope %d: %v", i, r.Err)
		}
		if i == 50 {
			if !r.Duplicate || r.Seq != 1 {
				t.Fatalf("envelope 50: %+v, want a duplicate of seq 1", r)
			}
			continue
		}
		if r.Duplicate || r.Seq != want {
			t.Fatalf("envelope %d: %+v, want stored at %d", i, r, want)
		}
		want++
	}
	if got := streamMsgs(t, st); got != n {
		t.Fatalf("stream holds %d messages, want %d", got, n)
	}
	if s := a.CommitStats(); s.Fallbacks == 0 || s.Envelopes+s.Plain != n-1 {
		t.Fatalf("commit stats %+v, want a refused batch and %d envelopes stored", s, n-1)
	}
}

// TestVerifiedDuplicateClash: other bytes stored first under the
// (predictable) Nats-Msg-Id of an envelope do not swallow it: it is stored
// anyway, flagged with Ledger-Msg-Id-Clash, answered as stored; appending
// it again is then a verified duplicate of that copy.
func TestVerifiedDuplicateClash(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, st := ledgerJS(t)
	a := newAppender(t, js, appendlog.AppenderOptions{})

	for _, tc := range []struct {
		name   string
		squat  func(p *ledger.Prepared) *nats.Msg
		wantAt uint64
	}{
		{"garbage", func(p *ledger.Prepared) *nats.Msg {
			return &nats.Msg{Subject: p.Subject, Data: []byte("squatted"), Header: nats.Header{}}
		}, 2},
		{"other envelope", func(p *ledger.Prepared) *nats.Msg {
			return &nats.Msg{Subject: p.Subject, Data: tProposal(p.Decoded.Env.ID, "mallory").raw(), Header: nats.Header{}}
		}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tProposal("clash-"+tc.name, "alice").raw()
			p, err := a.Prepare("", raw)
			if err != nil {
				t.Fatal(err)
			}
			m := tc.squat(p)
			m.Header.Set(jetstream.MsgIDHeader, p.MsgID)
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatalf("squat: %v", err)
			}
			r := mustAppend(t, a, "", raw)
			if r.Duplicate || r.Seq != tc.wantAt {
				t.Fatalf("append after squat: %+v, want stored at %d", r, tc.wantAt)
			}
			sm, err := st.GetMsg(ctx, r.Seq)
			if err != nil {
				t.Fatal(err)
			}
			if string(sm.Data) != string(raw) || sm.Subject != p.Subject || sm.Header.Get(ledger.HeaderMsgIDClash) != p.MsgID {
				t.Fatalf("stored %s %q %v, want the envelope flagged with %s: %s", sm.Subject, sm.Data, sm.Header, ledger.HeaderMsgIDClash, p.MsgID)
			}
			again := mustAppend(t, a, "", raw)
			if !again.Duplicate || again.Seq != r.Seq {
				t.Fatalf("append again: %+v, want a duplicate of %d", again, r.Seq)
			}
		})
	}
	if n := streamMsgs(t, st); n != 4 {
		t.Fatalf("stream holds %d messages, want 4", n)
	}
}

// TestGroupCommitConnectionDropMidCommit: a batch reaches the stream and
// its commit ack is lost with the connection; the committer learns, one
// envelope at a time, that each was stored: every envelope acknowledged
// with its own sequence, none stored twice.
func TestGroupCommitConnectionDropMidCommit(t *testing.T) {
	_, st, px, js := proxied(t, false)
	a := newAppender(t, js, appendlog.AppenderOptions{AckTimeout: 300 * time.Millisecond, MaxRetries: 8, RetryWait: 20 * time.Millisecond})
	const n = 200
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(idf("drop", i), "carol").raw()
	}
	px.Hold()
	done := make(chan []ledger.Result, 1)
	go func() { done <- a.AppendMany(context.Background(), "", raws) }()
	waitMsgs(t, st, 1, nil) // the first batch is stored, its ack held back
	loseAcks(t, px, a)
	rs := <-done
	seen := map[uint64]bool{}
	for i, r := range rs {
		if r.Err != nil || r.Seq == 0 || seen[r.Seq] {
			t.Fatalf("envelope %d: %+v", i, r)
		}
		seen[r.Seq] = true
		m, err := st.GetMsg(ctxT(t), r.Seq)
		if err != nil || string(m.Data) != string(raws[i]) {
			t.Fatalf("seq %d does not hold envelope %d: %v", r.Seq, i, err)
		}
	}
	if got := streamMsgs(t, st); got != n {
		t.Fatalf("stream holds %d messages, want %d", got, n)
	}
	if s := a.CommitStats(); s.Fallbacks == 0 {
		t.Fatalf("commit stats %+v: the lost ack was not noticed", s)
	}
}

// TestEnsureStreamTurnsOnAtomic: a stream made before the group commit
// gets allow_atomic from EnsureStream.
func TestEnsureStreamTurnsOnAtomic(t *testing.T) {
	ctx := ctxT(t)
	_, _, js, _ := ledgerJS(t)
	if err := js.DeleteStream(ctx, subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	o := appendlog.StreamOptions{}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := o.StreamConfig()
	cfg.AllowAtomicPublish = false
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.CachedInfo().Config.AllowAtomicPublish {
		t.Fatal("allow_atomic still off")
	}
}

// TestCommitOptionsForSync: on a stream whose every write is synced the
// committer writes atomic batches; on one synced on an interval it
// publishes plain pipelined messages (an atomic batch saves no fsync
// there); an unknown server keeps atomic batches. Each way stores every
// envelope once, in order.
func TestCommitOptionsForSync(t *testing.T) {
	for _, c := range []struct {
		name   string
		sync   time.Duration
		known  bool
		atomic bool
	}{{"always", 0, true, true}, {"interval", time.Minute, true, false}, {"unknown", time.Minute, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			_, _, js, _ := ledgerJS(t)
			a := newAppender(t, js, appendlog.AppenderOptions{Commit: appendlog.CommitOptionsForSync(c.sync, c.known)})
			raws := make([][]byte, 300)
			for i := range raws {
				raws[i] = tProposal(fmt.Sprintf("s-%d", i), "alice").raw()
			}
			var last uint64
			for i, r := range a.AppendMany(ctx, "", raws) {
				if r.Err != nil || r.Seq <= last {
					t.Fatalf("envelope %d: %+v after seq %d", i, r, last)
				}
				last = r.Seq
			}
			s := a.CommitStats()
			if got := s.Batches > 0; got != c.atomic || s.Envelopes+s.Plain != 300 {
				t.Fatalf("stats %+v: atomic batches %v, want %v", s, got, c.atomic)
			}
		})
	}
}

// loseAcks cuts the connection (dropping the acks held back) and makes
// sure the acks are lost: the server answers a commit only after its
// fsync, which can outlast the client's reconnection, so the proxy holds
// the new connection's answers too until the committer has given up on
// a batch (a fallback), and then cuts again.
func loseAcks(t *testing.T, px *crashrig.Proxy, a *appendlog.Appender) {
	t.Helper()
	px.Cut()
	px.Hold()
	ctx := ctxT(t)
	for a.CommitStats().Fallbacks == 0 {
		select {
		case <-ctx.Done():
			px.Cut()
			t.Fatalf("no batch given up on: %+v: %v", a.CommitStats(), ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	px.Cut()
}
