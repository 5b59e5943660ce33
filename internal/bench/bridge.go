package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mewledger/ledger/internal/bridge"
)

// FigBridge is the MEW bridge's figure (issue 23): lifecycle envelopes a
// bridge records per second from the stand-in gateway, through the group
// commit, sync always, and its receive-to-stored p99.
const FigBridge = "bridge"

// TargetBridge is the bridge's sustained rate target (envelopes/s).
const TargetBridge = 10_000

// bridgeFigure replays proposals from the stand-in MEW gateway, running
// in a process of its own (RunGatewayChild), through one real loopback
// WebSocket, as fast as it writes, to a bridge inside an in-process ledger
// (the Appender, as `ledger serve --bridge-mew-config`; fsync on every
// write), and measures envelopes stored per second from the first frame
// sent to the last answer, and the time from a frame's receipt to the
// ledger's answer.
func (r *Report) bridgeFigure(ctx context.Context, o *Options) error {
	frames, props, err := bridgeFrames(o.BridgeEvents, o.PadTo)
	if err != nil {
		return err
	}
	progress(o, "bridge: %d proposals (~%d bytes each) from a stand-in gateway in another process, sync_interval always", len(frames), avgSize(props))
	var p99s []float64
	rates, base, err := paired(ctx, o, FigBridge, o.Reps,
		func(ctx context.Context) (float64, error) {
			rate, p99, err := bridgeOnce(ctx, o, len(frames))
			p99s = append(p99s, p99)
			return rate, err
		},
		func(ctx context.Context) (float64, error) { return ingestRaw(ctx, o, props) })
	if err != nil {
		return err
	}
	row := Row{
		Figure: fmt.Sprintf("bridge: lifecycle envelopes/s, stand-in MEW gateway (another process, one WebSocket) → `ledger bridge mew` (in the server, batches of %d) → group commit (sync_interval always; %d envelopes, ~%d B)",
			bridge.DefaultBatchSize, len(frames), avgSize(props)),
		Unit: unitRate, Values: rates, Baseline: base, BaseName: "raw atomic batches of the same bytes",
		Target: fmt.Sprintf("≥ %d", TargetBridge),
	}
	row.ratios()
	row.verdict(median(rates) >= TargetBridge)
	r.Rows = append(r.Rows, row, Row{Figure: "bridge receive-to-stored p99", Unit: unitMs, Values: p99s})
	if err := r.coverageRow(ctx, o, props); err != nil {
		return err
	}
	return r.recordersRows(ctx, o, len(frames))
}

// bridgeOnce runs one repetition: a fresh ledger, gateway child and
// bridge; n is the number of frames the child sends.
func bridgeOnce(ctx context.Context, o *Options, n int) (rate, p99ms float64, err error) {
	a, stop, err := startApp(ctx, o)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	gw, err := startGatewayChild(ctx, o, o.BridgeEvents)
	if err != nil {
		return 0, 0, err
	}
	defer gw.close()
	if gw.hello.Frames != n {
		return 0, 0, fmt.Errorf("bench: gateway child sends %d frames, want %d", gw.hello.Frames, n)
	}
	var (
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, n)
		last  time.Time
		whole = make(chan struct{})
	)
	b, err := bridge.New(bridge.Options{Gateway: gw.hello.URL, MEWSpace: bridgeMEWSpace, Participant: bridgeParticipant, Token: "t", Space: space,
		Sink: bridge.AppenderSink{Appender: a.Appender(), Sessions: bridge.StoreSessions{Store: a.Store, StreamSeq: bridge.StreamLastSeq(a.JetStream())}}, ProbeInterval: -1, Logger: o.Logger,
		OnStored: func(received, stored time.Time) {
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, stored.Sub(received))
			last = stored
			if len(lat) == n {
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
	joinBy := time.Now().Add(time.Minute)
	for b.Health().State != bridge.StateJoined {
		if time.Now().After(joinBy) {
			return 0, 0, fmt.Errorf("bench: bridge did not join the gateway child in a minute (%+v)", b.Health())
		}
		time.Sleep(time.Millisecond)
	}
	if err := gw.send(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	select {
	case <-whole:
	case <-time.After(10 * time.Minute):
		return 0, 0, fmt.Errorf("bench: bridge: %d of %d stored after 10 minutes (%+v)", len(lat), n, b.Health())
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if h := b.Health(); h.Dropped > 0 || h.Gaps > 0 {
		return 0, 0, fmt.Errorf("bench: bridge dropped envelopes: %+v", h)
	}
	mu.Lock()
	defer mu.Unlock()
	return float64(n) / last.Sub(start).Seconds(), ms(durQuantile(lat, 0.99)), nil
}
