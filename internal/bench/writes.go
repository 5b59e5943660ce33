package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
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
		progress(o, "writes: %d events streamed in HTTP NDJSON requests of %d, the projector %s, default duplicate window, sync_interval always", o.WritesEvents, writesRequest, state)
		res, err := writesOnce(ctx, o, stopped)
		if err != nil {
			return err
		}
		progress(o, "writes (projector %s): %.0f events/s, %d refused, %d answered duplicate, %d log lookups, stream holds %d", state, res.rate, res.refused, res.duplicates, res.logLookups, res.stored)
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
			Figure: fmt.Sprintf("writes, projector %s: events/s of %d appended at full speed in HTTP NDJSON requests of %d, one after the other (default duplicate window, sync_interval always); %d refused, %d stored, %d answered duplicate after a late commit ack, %d group lookups in the log",
				state, o.WritesEvents, writesRequest, res.refused, res.stored, res.duplicates, res.logLookups),
			Unit: unitRate, Values: []float64{res.rate}, Target: target, Verdict: verdict,
		})
	}
	return nil
}

type writesResult struct {
	rate                float64
	refused, duplicates int
	stored              uint64
	logLookups          int64
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
	cl, err := client.New(a.HTTPURL())
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	runtime.GC()
	n := 0
	start := time.Now()
	// Requests of writesRequest events (a request's body is bounded by
	// the server's batch size limit), one after the other.
	for from := 0; from < o.WritesEvents; from += writesRequest {
		k := min(writesRequest, o.WritesEvents-from)
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeWorkload(ctx, pw, from, k, o.PadTo)) }()
		err = cl.AppendStream(ctx, pr, func(r api.AppendResult) error {
			n++
			switch {
			case r.Error != nil:
				res.refused++
			case r.Seq == 0:
				return fmt.Errorf("bench: writes line %d: %+v, want stored", r.Line, r)
			case r.Duplicate:
				// A member of a group whose commit was not acknowledged in
				// time, found stored when it was published again: counted,
				// and the stream's count below says whether anything was
				// stored twice.
				res.duplicates++
			}
			return nil
		}, client.WithSpace(space))
		_ = pr.CloseWithError(io.ErrClosedPipe)
		if err != nil {
			return res, err
		}
	}
	took := time.Since(start)
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

// writesRequest is how many events one request of the writes figure
// carries (~42 MB of the benchmark mix, under the server's default 64 MiB).
const writesRequest = 100_000

// writeWorkload writes envelopes from to from+n of the writes figure's
// stream to w, one a line: a chain of generators (a fresh one, with a
// fresh id prefix, every writesRequest events) so that memory does not
// grow with the figure's size. from is a multiple of writesRequest.
func writeWorkload(ctx context.Context, w io.Writer, from, n, padTo int) error {
	const chunk = writesRequest
	var (
		buf bytes.Buffer
		g   *workload.Generator
	)
	for i := from; i < from+n; i++ {
		if i%chunk == 0 {
			gen := i/chunk + 1
			g = workload.New(workload.Options{Seed: seed + int64(gen), Mix: workload.BenchMix, PadTo: padTo, Prefix: fmt.Sprintf("w%d-", gen)})
		}
		buf.Write(g.Next())
		buf.WriteByte('\n')
		if buf.Len() >= 1<<20 || i == from+n-1 {
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
