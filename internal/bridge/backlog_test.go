package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// slowSink is a real sink that holds its batches until released: a
// ledger slower than the space.
type slowSink struct {
	bridge.Sink
	hold chan struct{}
}

func (s *slowSink) AppendBatch(ctx context.Context, space string, batch []bridge.Envelope) ([]api.AppendResult, error) {
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
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
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
	// Drained: the holes are recorded at once, though the space is quiet.
	waitFor(t, "the gaps recorded", func() (bool, string) {
		h := b.Health()
		return h.Backlog == 0 && h.Gaps >= 1 && h.Frames >= n+1, fmt.Sprintf("%+v", h)
	})
	gw.Broadcast("m", frame(n)) // the first after the holes
	waitFor(t, "the next envelope stored", func() (bool, string) {
		h := b.Health()
		return h.Backlog == 0 && h.LastStored == fmt.Sprintf("b-%d", n), fmt.Sprintf("%+v", h)
	})
	// Every hole is recorded before the next envelope is appended, so the
	// drops may have come in several runs (several gaps), all recorded now.
	h = b.Health()
	gaps := gapsOf(t, cl, space)
	dropped := 0
	for _, g := range gaps {
		if !strings.Contains(g.Reason, "backlog full") {
			t.Errorf("gap %+v: not a backlog gap", g)
		}
		dropped += g.Dropped
	}
	if len(gaps) != h.Gaps || dropped != h.Dropped {
		t.Fatalf("gaps %+v (%d dropped), want %d gaps of %d dropped", gaps, dropped, h.Gaps, h.Dropped)
	}
	ro := apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)}
	seqOf := map[int]uint64{}
	for i := 0; i <= n; i++ {
		hist, _, err := cl.History(context.Background(), fmt.Sprintf("b-%d", i), ro)
		if err == nil {
			seqOf[i] = hist.Events[0].Seq
		}
	}
	if n+1-len(seqOf) != h.Dropped {
		t.Errorf("%d missing, %d dropped", n+1-len(seqOf), h.Dropped)
	}
	for i := 0; i <= n; i++ {
		if _, ok := seqOf[i]; ok {
			continue
		}
		inside := false
		for _, g := range gaps {
			from := -1
			if g.LastEnvelope != "" {
				fmt.Sscanf(g.LastEnvelope, "b-%d", &from)
			}
			to := n + 1
			for j := from + 1; j <= n; j++ {
				if s, ok := seqOf[j]; ok && s > g.Seq {
					to = j
					break
				}
			}
			inside = inside || (from < i && i < to)
		}
		if !inside {
			t.Errorf("b-%d is missing and inside no gap window", i)
		}
	}
}
