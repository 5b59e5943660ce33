package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mewledger/ledger/internal/bridge"
)

// The bridge figure with several recorders of one MEW space (contract §14
// "Several recorders", issue 38): two live bridges joined to the stand-in
// gateway (in a process of its own) and a --history follower of the
// gateway's envelope-history.jsonl, all three in one ledger process
// (as `ledger serve --bridge-mew-config`), each envelope stored once and
// answered duplicate to the two others.

// GatewayHistoryFlag makes the gateway child write its envelope history.
const GatewayHistoryFlag = "internal-gateway-history"

// Participants of the recorders figure (the gateway child waits for
// bridgeParticipant; the parent starts sending once all have joined).
const (
	recorderB   = "ledger-recorder-b"
	recorderLog = "ledger-recorder-log"
)

// recordersRows measures, in full mode only (three appends of every
// envelope), the envelopes stored per second and the duplicates
// answered per second with three recorders; n is the number of frames
// the gateway child sends.
func (r *Report) recordersRows(ctx context.Context, o *Options, n int) error {
	if o.Quick {
		return nil
	}
	progress(o, "bridge: %d proposals recorded by two live bridges and a --history follower of one space", n)
	var stored, dups []float64
	for rep := range o.Reps {
		s, d, err := recordersOnce(ctx, o, n)
		if err != nil {
			return fmt.Errorf("bench: recorders rep %d: %w", rep+1, err)
		}
		stored, dups = append(stored, s), append(dups, d)
	}
	row := Row{
		Figure: fmt.Sprintf("bridge, three recorders of one space (two live bridges + a --history follower of the stand-in gateway's log, gateway in another process): envelopes stored/s (%d envelopes, each stored once)", n),
		Unit:   unitRate, Values: stored, Target: fmt.Sprintf("≥ %d", TargetBridge),
	}
	row.verdict(median(stored) >= TargetBridge)
	r.Rows = append(r.Rows, row, Row{
		Figure: "bridge, three recorders: duplicates answered/s (every envelope sent again by the two recorders that came second)",
		Unit:   unitRate, Values: dups,
	})
	return nil
}

// recordersOnce runs one repetition: a fresh ledger, gateway child (its
// history in a temporary directory) and three recorders. stored is n
// over the time from the first frame sent to the last envelope stored;
// dups the duplicates answered over the time until every recorder has
// been answered for every envelope.
func recordersOnce(ctx context.Context, o *Options, n int) (stored, dups float64, err error) {
	a, stop, err := startApp(ctx, o)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-recorders-*")
	if err != nil {
		return 0, 0, fmt.Errorf("bench: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	history := filepath.Join(dir, "envelope-history.jsonl")
	gw, err := startGatewayChild(ctx, o, o.BridgeEvents, "--"+GatewayHistoryFlag+"="+history)
	if err != nil {
		return 0, 0, err
	}
	defer gw.close()
	if gw.hello.Frames != n {
		return 0, 0, fmt.Errorf("bench: gateway child sends %d frames, want %d", gw.hello.Frames, n)
	}
	sink := bridge.AppenderSink{Appender: a.Appender(), Sessions: bridge.StoreSessions{Store: a.Store, StreamSeq: bridge.StreamLastSeq(a.JetStream())}}
	base := bridge.Options{MEWSpace: bridgeMEWSpace, Token: "t", Space: space, Sink: sink, ProbeInterval: -1, Logger: o.Logger}
	opts := []bridge.Options{base, base, base}
	opts[0].Gateway, opts[0].Participant = gw.hello.URL, bridgeParticipant
	opts[1].Gateway, opts[1].Participant = gw.hello.URL, recorderB
	opts[2].HistoryFile, opts[2].Participant, opts[2].PollInterval = history, recorderLog, 5*time.Millisecond
	bctx, cancel := context.WithCancel(ctx)
	var (
		bs   []*bridge.Bridge
		done = make(chan error, len(opts))
	)
	defer func() {
		cancel()
		for range bs {
			<-done
		}
	}()
	for _, bo := range opts {
		b, err := bridge.New(bo)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: bridge: %w", err)
		}
		bs = append(bs, b)
		go func() { done <- b.Run(bctx) }()
	}
	ready := func() bool {
		for i, b := range bs {
			want := bridge.StateJoined
			if i == 2 {
				want = bridge.StateFollowing
			}
			if b.Health().State != want {
				return false
			}
		}
		return true
	}
	if err := poll(ctx, time.Minute, ready); err != nil {
		return 0, 0, fmt.Errorf("bench: recorders did not join the gateway child: %w", err)
	}
	if err := gw.send(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	var storedAt time.Time
	all := func() bool {
		appended, answered := 0, 0
		for _, b := range bs {
			h := b.Health()
			appended += h.Appended
			if h.Appended+h.Duplicates >= n {
				answered++
			}
		}
		if appended >= n && storedAt.IsZero() {
			storedAt = time.Now()
		}
		return answered == len(bs)
	}
	if err := poll(ctx, 10*time.Minute, all); err != nil {
		return 0, 0, fmt.Errorf("bench: recorders: not every envelope answered: %w", err)
	}
	took := time.Since(start)
	appended, duplicates := 0, 0
	for _, b := range bs {
		h := b.Health()
		if h.Dropped > 0 || h.Gaps > 0 {
			return 0, 0, fmt.Errorf("bench: recorder %s lost envelopes: %+v", h.Bridge, h)
		}
		appended += h.Appended
		duplicates += h.Duplicates
	}
	if appended != n || duplicates != 2*n {
		return 0, 0, fmt.Errorf("bench: recorders stored %d and were answered %d duplicates, want %d and %d", appended, duplicates, n, 2*n)
	}
	return float64(n) / storedAt.Sub(start).Seconds(), float64(duplicates) / took.Seconds(), nil
}

// poll checks cond every millisecond until it holds, ctx ends or limit
// passes.
func poll(ctx context.Context, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("still not done after %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
