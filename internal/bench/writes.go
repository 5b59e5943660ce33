package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/mewledger/ledger/internal/lib/apiclient"
	"github.com/mewledger/ledger/internal/lib/wire"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/subjects"
)

// FigWrites is the figure of writes that do not depend on the reader
// (issue 35): a long ingest at full speed with the default duplicate
// window, once with the projector folding along and once with it stopped
// from the start; every append must be accepted, none stored twice.
const FigWrites = "writes"

// Sizes of the writes figure.
const (
	FullWritesEvents  = 2_000_000
	QuickWritesEvents = 3_000
)

// writesFigure runs the writes figure: one run per projector state (its
// figure is long), the events generated on the fly (bounded memory).
func (r *Report) writesFigure(ctx context.Context, o *Options) error {
	for _, stopped := range []bool{false, true} {
		state := "folding along"
		if stopped {
			state = "stopped"
		}
		progress(o, "writes: %d events streamed in one HTTP NDJSON request, the projector %s, default duplicate window, sync_interval always", o.WritesEvents, state)
		res, err := writesOnce(ctx, o, stopped)
		if err != nil {
			return err
		}
		progress(o, "writes (projector %s): %.0f events/s, %d refused, %d log lookups, stream holds %d", state, res.rate, res.refused, res.logLookups, res.stored)
		target := ""
		verdict := ""
		if stopped {
			target = "0 refused, none stored twice"
			verdict = "missed"
			if res.refused == 0 && res.stored == uint64(o.WritesEvents) {
				verdict = "met"
			}
		}
		r.Rows = append(r.Rows, Row{
			Figure: fmt.Sprintf("writes, projector %s: events/s of %d appended at full speed in one HTTP NDJSON request (default duplicate window, sync_interval always); %d refused, %d stored, %d group lookups in the log",
				state, o.WritesEvents, res.refused, res.stored, res.logLookups),
			Unit: unitRate, Values: []float64{res.rate}, Target: target, Verdict: verdict,
		})
	}
	return nil
}

type writesResult struct {
	rate       float64
	refused    int
	stored     uint64
	logLookups int64
}

// writesOnce runs one ingest of o.WritesEvents on a fresh ledger, its
// projector paused before the first append when stopped.
func writesOnce(ctx context.Context, o *Options, stopped bool) (writesResult, error) {
	var res writesResult
	a, stop, err := startApp(ctx, o)
	if err != nil {
		return res, err
	}
	defer stop()
	defer commitProgress(o, "writes", a.Appender())
	if stopped {
		a.Projector().Pause()
		defer a.Projector().Resume()
	}
	cl, err := apiclient.New(apiclient.Options{API: a.HTTPURL()})
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	pr, pw := io.Pipe()
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { pw.CloseWithError(writeWorkload(gctx, pw, o.WritesEvents, o.PadTo)) }()
	runtime.GC()
	n := 0
	start := time.Now()
	err = cl.PublishStream(ctx, space, false, pr, func(r wire.AppendResult) error {
		n++
		switch {
		case r.Error != nil:
			res.refused++
		case r.Duplicate || r.Seq == 0:
			return fmt.Errorf("bench: writes line %d: %+v, want stored", r.Line, r)
		}
		return nil
	})
	took := time.Since(start)
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return res, err
	}
	if n != o.WritesEvents {
		return res, fmt.Errorf("bench: writes: %d answers for %d lines", n, o.WritesEvents)
	}
	res.rate = float64(n) / took.Seconds()
	res.logLookups = a.Appender().CommitStats().LogLookups
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	st, err := a.JetStream().Stream(sctx, subjects.StreamName)
	if err != nil {
		return res, fmt.Errorf("bench: writes: %w", err)
	}
	info, err := st.Info(sctx)
	if err != nil {
		return res, fmt.Errorf("bench: writes: %w", err)
	}
	res.stored = info.State.Msgs
	return res, nil
}

// writeWorkload writes n envelopes of the benchmark mix to w, one a line,
// from a chain of generators (a fresh one, with a fresh id prefix, every
// 100,000 events) so that memory does not grow with n.
func writeWorkload(ctx context.Context, w io.Writer, n, padTo int) error {
	const chunk = 100_000
	var (
		buf bytes.Buffer
		g   *workload.Generator
	)
	for i := 0; i < n; i++ {
		if i%chunk == 0 {
			gen := i/chunk + 1
			g = workload.New(workload.Options{Seed: seed + int64(gen), Mix: workload.BenchMix, PadTo: padTo, Prefix: fmt.Sprintf("w%d-", gen)})
		}
		buf.Write(g.Next())
		buf.WriteByte('\n')
		if buf.Len() >= 1<<20 || i == n-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
			buf.Reset()
		}
	}
	return nil
}
