package appendlog_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/mewledger/ledger/subjects"
)

// BenchmarkDurablePaths measures the server's two durable paths with
// sync_interval always (natstest's default), on one connection, without
// the committer: atomic batches of n envelopes with f awaiting their
// commit at once, and plain messages with f awaiting their acks at once
// (pipelined). b.N is envelopes. It reports envelopes/s and, for batches,
// ms/batch: the numbers the committer's choice between the paths rests on
// (commit_cost.go). Run on a quiet machine:
//
//	go test ./ledger/appendlog/ -run '^$' -bench DurablePaths -benchtime 3000x
func BenchmarkDurablePaths(b *testing.B) {
	for _, f := range []int{1, 4} {
		for _, n := range []int{1, 4, 8, 16, 32, 64} {
			b.Run(fmt.Sprintf("atomic/n=%d/inflight=%d", n, f), func(b *testing.B) { benchPath(b, n, f) })
		}
	}
	for _, f := range []int{1, 2, 4, 8, 16, 32} {
		b.Run(fmt.Sprintf("plain/inflight=%d", f), func(b *testing.B) { benchPath(b, 0, f) })
	}
	// Fast batches (nats-server ≥ 2.14, ADR-50: flow-controlled, not
	// atomic, each message stored on its own): the stream allows them
	// beside atomic batches.
	for _, f := range []int{1, 4} {
		for _, n := range []int{16, 64, 256} {
			b.Run(fmt.Sprintf("fast/n=%d/inflight=%d", n, f), func(b *testing.B) { benchFast(b, n, f) })
		}
	}
}

// benchFast publishes b.N envelopes as fast batches of n with up to f
// batches awaiting their final PubAck (flow-control acks are read and
// not waited for: a batch of n ≤ 500 is within the first window).
func benchFast(b *testing.B, n, f int) {
	_, nc, js, st := ledgerJS(b)
	ctx := b.Context()
	info, err := st.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	cfg := info.Config
	cfg.AllowBatchPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	raw := tProposal("bench-envelope", "alice").raw()
	subj := subjects.Filter("bench", "k", "proposal", "alice")
	inbox := nc.NewInbox()
	window := make(chan struct{}, f)
	var (
		mu    sync.Mutex
		first error
	)
	sub, err := nc.Subscribe(inbox+".>", func(m *nats.Msg) {
		var ack struct {
			Type  string              `json:"type"`
			Seq   uint64              `json:"seq"`
			Count int                 `json:"count"`
			Error *jetstream.APIError `json:"error"`
		}
		err := json.Unmarshal(m.Data, &ack)
		if err == nil && ack.Type == "ack" && ack.Error == nil { // flow control
			return
		}
		if err != nil || ack.Error != nil || ack.Seq == 0 {
			mu.Lock()
			if first == nil {
				first = fmt.Errorf("ack %s: %v", m.Data, err)
			}
			mu.Unlock()
		}
		<-window
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	groups := 0
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		window <- struct{}{}
		id := nuid.Next()
		k := min(n, b.N-sent)
		for i := range k {
			m := &nats.Msg{Subject: subj, Data: raw, Header: nats.Header{}}
			m.Header.Set(jetstream.MsgIDHeader, id+"-"+strconv.Itoa(i))
			op := 1 // append
			switch {
			case i == k-1:
				op = 2 // commit
			case i == 0:
				op = 0 // start
			}
			m.Reply = fmt.Sprintf("%s.%s.%d.fail.%d.%d.$FI", inbox, id, n, i+1, op)
			if err := nc.PublishMsg(m); err != nil {
				b.Fatal(err)
			}
		}
		sent += k
		groups++
	}
	for range f {
		window <- struct{}{}
	}
	took := time.Since(start)
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "envelopes/s")
	b.ReportMetric(took.Seconds()*1000/float64(groups), "ms/batch")
	b.ReportMetric(0, "ns/op")
}

// benchPath publishes b.N envelopes as atomic batches of n (n 0: plain
// messages) with up to f batches (or messages) awaiting their answer.
func benchPath(b *testing.B, n, f int) {
	_, nc, _, _ := ledgerJS(b)
	raw := tProposal("bench-envelope", "alice").raw()
	subj := subjects.Filter("bench", "k", "proposal", "alice")
	inbox := nc.NewInbox()
	window := make(chan struct{}, f)
	var (
		mu    sync.Mutex
		first error
	)
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		var ack struct {
			Seq   uint64              `json:"seq"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &ack); err != nil || ack.Error != nil || ack.Seq == 0 {
			mu.Lock()
			if first == nil {
				first = fmt.Errorf("ack %s: %v", m.Data, err)
			}
			mu.Unlock()
		}
		<-window
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	size := max(n, 1)
	groups := 0
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		window <- struct{}{}
		id := nuid.Next()
		k := min(size, b.N-sent)
		for i := range k {
			m := &nats.Msg{Subject: subj, Data: raw, Header: nats.Header{}}
			m.Header.Set(jetstream.MsgIDHeader, id+"-"+strconv.Itoa(i))
			if n > 0 {
				m.Header.Set("Nats-Batch-Id", id)
				m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
			}
			if n == 0 || i == k-1 {
				if n > 0 {
					m.Header.Set("Nats-Batch-Commit", "1")
				}
				m.Reply = inbox + "." + id
			}
			if err := nc.PublishMsg(m); err != nil {
				b.Fatal(err)
			}
		}
		sent += k
		groups++
	}
	for range f {
		window <- struct{}{}
	}
	took := time.Since(start)
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(b.N)/took.Seconds(), "envelopes/s")
	if n > 0 {
		b.ReportMetric(took.Seconds()*1000/float64(groups), "ms/batch")
	}
	b.ReportMetric(0, "ns/op")
}
