package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/apiclient"
	"github.com/mewledger/ledger/internal/lib/wire"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/mewgw"
)

// slowSink is a real sink that holds its batches until released: a
// ledger slower than the space.
type slowSink struct {
	bridge.Sink
	hold chan struct{}
}

func (s *slowSink) AppendBatch(ctx context.Context, space string, batch []bridge.Envelope) ([]wire.AppendResult, error) {
	select {
	case <-s.hold:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Sink.AppendBatch(ctx, space, batch)
}

// TestBacklogFullGivesGap: while the ledger does not keep up, the
// bridge's backlog stays under its bound; the envelopes that do not fit
// are dropped and counted, and the hole is a recorded gap whose window
// holds every one of them, recorded before the first envelope stored
// after it.
func TestBacklogFullGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(apiclient.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	sink := &slowSink{Sink: bridge.AppenderSink{Appender: a.Appender()}, hold: make(chan struct{})}
	const space, limit = "backlog", 2000
	b := startBridge(t, bridge.Options{Gateway: gw.URL(), MEWSpace: "m", Token: "t", Space: space, Sink: sink,
		ProbeInterval: -1, MaxBacklogBytes: limit, BatchSize: 1})
	waitJoined(t, gw, b, "m", 1)
	frame := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"protocol":"mew/v0.4","id":"b-%d","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`, i))
	}
	const n = 60
	for i := range n {
		gw.Broadcast("m", frame(i))
	}
	waitFor(t, "drops", func() (bool, string) {
		h := b.Health()
		return h.Frames+h.Backlog >= n, fmt.Sprintf("%+v", h)
	})
	h := b.Health()
	if h.Dropped == 0 || h.BacklogBytes > limit {
		t.Fatalf("health %+v: want drops and a backlog under %d bytes", h, limit)
	}
	close(sink.hold)
	gw.Broadcast("m", frame(n)) // the first after the hole: the gap goes before it
	waitFor(t, "everything answered", func() (bool, string) {
		h := b.Health()
		return h.Backlog == 0 && h.Gaps == 1 && h.LastStored == fmt.Sprintf("b-%d", n), fmt.Sprintf("%+v", h)
	})
	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 || !strings.Contains(gaps[0].Reason, "backlog full") || gaps[0].Dropped != h.Dropped {
		t.Fatalf("gaps %+v, want one backlog gap of %d dropped", gaps, h.Dropped)
	}
	g := gaps[0]
	ro := apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)}
	last := -1
	var missing []int
	for i := 0; i <= n; i++ {
		hist, _, err := cl.History(context.Background(), fmt.Sprintf("b-%d", i), ro)
		if err != nil {
			missing = append(missing, i)
			continue
		}
		if hist.Events[0].Seq < g.Seq {
			last = i
		} else if len(missing) > 0 && missing[len(missing)-1] > i {
			t.Errorf("b-%d stored after the gap but before a missing one", i)
		}
	}
	if len(missing) != h.Dropped || g.LastEnvelope != fmt.Sprintf("b-%d", last) {
		t.Errorf("%d missing %v, %d dropped; gap from %s, last stored before it b-%d", len(missing), missing, h.Dropped, g.LastEnvelope, last)
	}
	for _, i := range missing {
		if i <= last {
			t.Errorf("b-%d missing before the gap's window", i)
		}
	}
}
