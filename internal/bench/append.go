package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/mewledger/ledger/ledger/appendlog"
)

// measure is one timed side of a repetition: it returns a rate (per
// second) or a duration figure.
type measure func(ctx context.Context) (float64, error)

// paired runs reps repetitions of a ledger measurement and its baseline,
// back to back, alternating which goes first, and returns both series.
func paired(ctx context.Context, o *Options, name string, reps int, ledgerSide, baseline measure) (vals, base []float64, err error) {
	for r := range reps {
		steps := []struct {
			side string
			f    measure
			out  *[]float64
		}{{"ledger", ledgerSide, &vals}, {"baseline", baseline, &base}}
		if r%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			runtime.GC() // the previous step's garbage is not this one's cost
			v, err := s.f(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("%s, repetition %d, %s: %w", name, r+1, s.side, err)
			}
			*s.out = append(*s.out, v)
			progress(o, "%s rep %d/%d %s: %.0f/s", name, r+1, reps, s.side, v)
		}
	}
	return vals, base, nil
}

// appendLedger appends evs through the ledger's Appender.AppendMany on a
// fresh server and returns events per second.
func appendLedger(ctx context.Context, o *Options, evs []event, syncAlways bool) (float64, error) {
	e, err := startEnv(ctx, o.TempDir, syncAlways, o.Logger)
	if err != nil {
		return 0, err
	}
	defer e.close()
	// The ledger's own policy for the server the bench starts: atomic
	// batches when every write is synced, plain pipelined messages when
	// not (appendlog.CommitOptionsForSync, as ledger serve does).
	var sync time.Duration
	if !syncAlways {
		sync = time.Minute
	}
	a, err := appendlog.NewAppender(e.js, appendlog.AppenderOptions{MaxInFlight: o.Window, Commit: appendlog.CommitOptionsForSync(sync, true)})
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer a.Close()
	rs := raws(evs)
	runtime.GC()
	cpu := startCPU()
	start := time.Now()
	res := a.AppendMany(ctx, space, rs)
	took := time.Since(start)
	cores, per := cpu.stop(len(rs))
	progress(o, "append ledger: %.2f cores busy, %v CPU per event", cores, per)
	for i, r := range res {
		switch {
		case r.Err != nil:
			return 0, fmt.Errorf("bench: append %d: %w", i, r.Err)
		case r.Duplicate:
			return 0, fmt.Errorf("bench: append %d: stored as a duplicate", i)
		}
	}
	if err := checkStored(ctx, e, len(evs)); err != nil {
		return 0, err
	}
	return float64(len(evs)) / took.Seconds(), nil
}

// appendRaw is the baseline: the same bytes with the same Nats-Msg-Id and
// window through jetstream.PublishAsync.
func appendRaw(ctx context.Context, o *Options, evs []event, syncAlways bool) (float64, error) {
	e, err := startEnv(ctx, o.TempDir, syncAlways, o.Logger)
	if err != nil {
		return 0, err
	}
	defer e.close()
	runtime.GC()
	cpu := startCPU()
	start := time.Now()
	if err := publishRaw(ctx, e.nc, evs, o.Window); err != nil {
		return 0, err
	}
	took := time.Since(start)
	cores, per := cpu.stop(len(evs))
	progress(o, "append raw: %.2f cores busy, %v CPU per event", cores, per)
	if err := checkStored(ctx, e, len(evs)); err != nil {
		return 0, err
	}
	return float64(len(evs)) / took.Seconds(), nil
}

// checkStored checks that the stream holds exactly n messages.
func checkStored(ctx context.Context, e *env, n int) error {
	_, msgs, err := e.state(ctx)
	if err != nil {
		return err
	}
	if msgs != uint64(n) {
		return fmt.Errorf("bench: the stream holds %d messages, want %d", msgs, n)
	}
	return nil
}

// progress writes one progress line.
func progress(o *Options, format string, args ...any) {
	fmt.Fprintf(o.Progress, "bench: "+format+"\n", args...)
}
