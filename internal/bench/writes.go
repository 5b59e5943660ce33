package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

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
		progress(o, "writes: %d events appended through the appender (AppendMany, chunks of %d), the projector %s, default duplicate window, sync_interval always", o.WritesEvents, writesChunk, state)
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
			Figure: fmt.Sprintf("writes, projector %s: events/s of %d appended at full speed through the appender in AppendMany calls of %d (default duplicate window, sync_interval always); %d refused, %d stored, %d answered duplicate after a late commit ack, %d group lookups in the log",
				state, o.WritesEvents, writesChunk, res.refused, res.stored, res.duplicates, res.logLookups),
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
	runtime.GC()
	n := 0
	start := time.Now()
	// Chunks of writesChunk envelopes, generated on the fly (bounded
	// memory), each through the appender's AppendMany (what every append
	// path calls), one after the other.
	gen := newWorkloadChain(o.PadTo)
	chunk := make([][]byte, 0, writesChunk)
	for n < o.WritesEvents {
		chunk = chunk[:0]
		for range min(writesChunk, o.WritesEvents-n) {
			chunk = append(chunk, gen.next())
		}
		for i, r := range a.Appender().AppendMany(ctx, space, chunk) {
			switch {
			case r.Err != nil:
				res.refused++
				if res.refused == 1 {
					progress(o, "writes: envelope %d refused: %v", n+i, r.Err)
				}
			case r.Duplicate:
				// A member of a group whose commit was not acknowledged in
				// time, found stored when it was published again: counted,
				// and the stream's count below says whether anything was
				// stored twice.
				res.duplicates++
			}
		}
		n += len(chunk)
		if err := ctx.Err(); err != nil {
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

// writesChunk is how many envelopes one AppendMany call of the writes
// figure carries.
const writesChunk = 10_000

// workloadChain is an endless source of the benchmark mix: a chain of
// generators (a fresh one, with a fresh id prefix, every 100,000 events)
// so that memory does not grow with the figure's size.
type workloadChain struct {
	padTo, n, gen int
	g             *workload.Generator
}

func newWorkloadChain(padTo int) *workloadChain { return &workloadChain{padTo: padTo} }

func (c *workloadChain) next() []byte {
	const chunk = 100_000
	if c.n%chunk == 0 {
		c.gen++
		c.g = workload.New(workload.Options{Seed: seed + int64(c.gen), Mix: workload.BenchMix, PadTo: c.padTo, Prefix: fmt.Sprintf("w%d-", c.gen)})
	}
	c.n++
	return c.g.Next()
}
