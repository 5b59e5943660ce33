package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/testkit/mewgw"
)

// FigBridge is the MEW bridge's figure (issue 23): lifecycle envelopes a
// bridge records per second from the stand-in gateway, through the group
// commit, sync always, and its receive-to-stored p99.
const FigBridge = "bridge"

// TargetBridge is the bridge's sustained rate target (envelopes/s).
const TargetBridge = 10_000

// bridgeFigure replays proposals through the stand-in MEW gateway (one
// WebSocket, as fast as it writes) to a bridge inside an in-process
// ledger (the Appender, as `ledger serve --bridge-mew-config`; fsync on
// every write), and measures envelopes stored per second from the first
// frame to the last answer, and the time from a frame's receipt to the
// ledger's answer.
func (r *Report) bridgeFigure(ctx context.Context, o *Options) error {
	evs, err := generate(0, o.BridgeEvents, o.PadTo)
	if err != nil {
		return err
	}
	// Only lifecycle envelopes the bridge appends: the workload's
	// proposals (the rest of its mix would be skipped or orphaned).
	var props []event
	var frames [][]byte
	for _, e := range evs {
		if bytes.Contains(e.raw, proposalKind) {
			props = append(props, e)
			frames = append(frames, e.raw)
		}
	}
	progress(o, "bridge: %d proposals (~%d bytes each) through the stand-in gateway, sync_interval always", len(frames), avgSize(props))
	var p99s []float64
	rates, base, err := paired(ctx, o, FigBridge, o.Reps,
		func(ctx context.Context) (float64, error) {
			rate, p99, err := bridgeOnce(ctx, o, frames)
			p99s = append(p99s, p99)
			return rate, err
		},
		func(ctx context.Context) (float64, error) { return ingestRaw(ctx, o, props) })
	if err != nil {
		return err
	}
	row := Row{
		Figure: fmt.Sprintf("bridge: lifecycle envelopes/s, stand-in MEW gateway → `ledger bridge mew` (in the server, batches of %d) → group commit (sync_interval always; %d envelopes, ~%d B)",
			bridge.DefaultBatchSize, len(frames), avgSize(props)),
		Unit: unitRate, Values: rates, Baseline: base, BaseName: "raw atomic batches of the same bytes",
		Target: fmt.Sprintf("≥ %d", TargetBridge),
	}
	row.ratios()
	row.verdict(median(rates) >= TargetBridge)
	r.Rows = append(r.Rows, row, Row{Figure: "bridge receive-to-stored p99", Unit: unitMs, Values: p99s})
	return r.coverageRow(ctx, o, props)
}

// bridgeOnce runs one repetition: a fresh ledger, gateway and bridge.
func bridgeOnce(ctx context.Context, o *Options, frames [][]byte) (rate, p99ms float64, err error) {
	a, stop, err := startApp(ctx, o)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	gw := mewgw.Start(nil)
	defer gw.Close()
	var (
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, len(frames))
		last  time.Time
		whole = make(chan struct{})
	)
	const mew = "bench"
	b, err := bridge.New(bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Participant: "ledger-recorder", Token: "t", Space: space,
		Sink: bridge.AppenderSink{Appender: a.Appender(), Sessions: bridge.StoreSessions{Store: a.Store, StreamSeq: bridge.StreamLastSeq(a.JetStream())}}, ProbeInterval: -1, Logger: o.Logger,
		OnStored: func(received, stored time.Time) {
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, stored.Sub(received))
			last = stored
			if len(lat) == len(frames) {
				close(whole)
			}
		}})
	if err != nil {
		return 0, 0, fmt.Errorf("bench: bridge: %w", err)
	}
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(bctx) }()
	defer func() { cancel(); <-done }()
	jctx, jcancel := context.WithTimeout(ctx, time.Minute)
	defer jcancel()
	if err := gw.WaitJoins(jctx, mew, "ledger-recorder", 1); err != nil {
		return 0, 0, fmt.Errorf("bench: bridge did not join: %w", err)
	}
	for b.Health().State != bridge.StateJoined {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	for _, f := range frames {
		gw.Broadcast(mew, f)
	}
	select {
	case <-whole:
	case <-time.After(10 * time.Minute):
		return 0, 0, fmt.Errorf("bench: bridge: %d of %d stored after 10 minutes (%+v)", len(lat), len(frames), b.Health())
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if h := b.Health(); h.Dropped > 0 || h.Gaps > 0 {
		return 0, 0, fmt.Errorf("bench: bridge dropped envelopes: %+v", h)
	}
	mu.Lock()
	defer mu.Unlock()
	return float64(len(frames)) / last.Sub(start).Seconds(), ms(durQuantile(lat, 0.99)), nil
}
