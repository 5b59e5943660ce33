package bench

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Targets of issue 6 (2-core machine).
const (
	TargetAppend     = 0.85
	TargetAppendSync = 0.85
	TargetFold       = 1.3
	TargetLagP99     = 250 * time.Millisecond
	TargetGetP99     = time.Millisecond
	TargetListP99    = 5 * time.Millisecond
	TargetEventsP99  = 5 * time.Millisecond // a filtered page of GET /v1/events (contract §7)
	TargetRSSMiB     = 256
	// FlatGrowth is the largest growth of peak RSS from the smallest to
	// the largest N that still counts as flat.
	FlatGrowth = 0.10
)

// Run measures every figure of o and returns the report. It removes
// every temporary directory it made and stops every server and child it
// started before returning.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &Report{
		Mode:      o.mode(),
		Reps:      o.Reps,
		Machine:   describeMachine(),
		LoadStart: loadAvg(),
		Started:   time.Now(),
		Ratios:    map[string]float64{},
	}
	defer func() {
		r.LoadEnd = loadAvg()
		r.Elapsed = time.Since(r.Started)
	}()
	progress(&o, "%s mode on %s; load average %s", r.Mode, r.Machine, r.LoadStart)

	var appendMax, syncMax float64 // the ledger's median append rates, for the lag figure
	if o.runs(FigAppend) {
		rate, err := r.appendFigure(ctx, &o, false)
		if err != nil {
			return r, err
		}
		appendMax = rate
	}
	if o.runs(FigAppendSync) {
		rate, err := r.appendFigure(ctx, &o, true)
		if err != nil {
			return r, err
		}
		syncMax = rate
	}
	var ingestMax float64 // the ledger's median ingest rate, for the lag figure
	if o.runs(FigIngest) {
		rate, err := r.ingestFigure(ctx, &o)
		if err != nil {
			return r, err
		}
		ingestMax = rate
	}
	if o.runs(FigIngestR3) {
		if err := r.ingestR3Figure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigAgents) {
		if err := r.agentsFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigBridge) {
		if err := r.bridgeFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigWrites) {
		if err := r.writesFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigFold) {
		if err := r.foldFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigLag) {
		if err := r.lagFigure(ctx, &o, appendMax, syncMax, ingestMax); err != nil {
			return r, err
		}
	}
	if o.runs(FigReads) {
		if err := r.readsFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigProofs) {
		if err := r.proofsFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigWitness) {
		if err := r.witnessFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	if o.runs(FigMemory) {
		if err := r.memoryFigure(ctx, &o); err != nil {
			return r, err
		}
	}
	return r, nil
}

// appendFigure measures append (or append_sync) and returns the ledger's
// median rate.
func (r *Report) appendFigure(ctx context.Context, o *Options, syncAlways bool) (float64, error) {
	name, proposals, target, syncDesc := FigAppend, o.Proposals, TargetAppend, "sync_interval "+DefaultSyncInterval.String()
	if syncAlways {
		name, proposals, target, syncDesc = FigAppendSync, o.SyncProposals, TargetAppendSync, "sync_interval always"
	}
	evs, err := generate(proposals, 0, o.PadTo)
	if err != nil {
		return 0, err
	}
	progress(o, "%s: %d events (%d proposals, ~%d bytes each), %s", name, len(evs), proposals, avgSize(evs), syncDesc)
	vals, base, err := paired(ctx, o, name, o.Reps,
		func(ctx context.Context) (float64, error) { return appendLedger(ctx, o, evs, syncAlways) },
		func(ctx context.Context) (float64, error) { return appendRaw(ctx, o, evs, syncAlways) })
	if err != nil {
		return 0, err
	}
	row := Row{
		Figure:   fmt.Sprintf("%s: events/s, Appender.AppendMany (%s; %d events, %d proposals, ~%d B, window %d)", name, syncDesc, len(evs), proposals, avgSize(evs), o.Window),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: "raw PublishAsync",
		Target:   fmt.Sprintf("ratio ≥ %.2f", target),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= target)
	r.Rows = append(r.Rows, row)
	r.Ratios[name] = median(row.Ratios)
	return median(vals), nil
}

// foldFigure measures the rebuild against the naive baseline.
func (r *Report) foldFigure(ctx context.Context, o *Options) error {
	evs, err := generate(0, o.Events, o.PadTo)
	if err != nil {
		return err
	}
	e, err := startEnv(ctx, o.TempDir, false, o.Logger)
	if err != nil {
		return err
	}
	defer e.close()
	if err := publishRaw(ctx, e.nc, evs, o.Window); err != nil {
		return err
	}
	n := len(evs)
	evs = nil // the stream has them
	progress(o, "fold: %d events in the stream", n)
	rep := 0
	var ledgerWAL, naiveWAL []float64 // bytes written per event folded (writeVolume)
	var ledgerDisk []float64          // the projection's bytes on disk per event after Close
	vals, base, err := paired(ctx, o, FigFold, o.Reps,
		func(ctx context.Context) (float64, error) {
			rate, wal, disk, err := foldLedger(ctx, o, e, n)
			ledgerWAL = append(ledgerWAL, float64(wal)/float64(n))
			ledgerDisk = append(ledgerDisk, float64(disk)/float64(n))
			return rate, err
		},
		func(ctx context.Context) (float64, error) {
			rep++
			rate, wal, err := foldNaive(ctx, o, e, n, fmt.Sprintf("bench-naive-%d", rep))
			naiveWAL = append(naiveWAL, float64(wal)/float64(n))
			return rate, err
		})
	if err != nil {
		return err
	}
	r.Notes = append(r.Notes, fmt.Sprintf("fold write volume (bytes per event folded, Pebble's WAL and the tables its flushes wrote, median): ledger %.0f B, naive baseline %.0f B. "+
		"The ledger keeps every event's history entry, its event ref (dedup by id), the proposal record and its list indexes; the baseline one small record per proposal.",
		median(ledgerWAL), median(naiveWAL)))
	r.Notes = append(r.Notes, fmt.Sprintf("fold footprint: the rebuilt projection takes %.0f B per event on disk after a clean Close (no WAL data left; the stream and the PostgreSQL peer's tables: `make peer`).",
		median(ledgerDisk)))
	row := Row{
		Figure:   fmt.Sprintf("fold: events/s, projector.Rebuild into a fresh store, %s (%d events)", foldMode(o), n),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: "naive read-modify-write",
		Target:   fmt.Sprintf("ratio ≥ %.1f", TargetFold),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= TargetFold)
	r.Rows = append(r.Rows, row)
	r.Ratios[FigFold] = median(row.Ratios)
	return nil
}

// lagFigure measures the live lag with the ledger's default durability
// (fsync on every write), appending through the group commit at LagLoad
// of the append_sync maximum and at LagLoad of the ingest maximum; in full
// mode also with nats-server's default sync interval at LagLoad of the
// append maximum, with per-message publishes. A maximum the run did not
// measure is measured once here.
func (r *Report) lagFigure(ctx context.Context, o *Options, appendMax, syncMax, ingestMax float64) error {
	if err := r.lagConfig(ctx, o, lagSync, syncMax); err != nil {
		return err
	}
	if err := r.lagConfig(ctx, o, lagIngest, ingestMax); err != nil {
		return err
	}
	if o.Quick {
		return nil
	}
	return r.lagConfig(ctx, o, lagInterval, appendMax)
}

// lagMode is one configuration of the live lag figure.
type lagMode int

const (
	// lagSync: sync always, every envelope through the app's Appender,
	// at LagLoad of the append_sync maximum (Appender.AppendMany's rate).
	lagSync lagMode = iota
	// lagIngest: sync always, every envelope through the app's Appender
	// (the group commit), at LagLoad of the ingest maximum.
	lagIngest
	// lagInterval: sync every DefaultSyncInterval, raw per-message
	// publishes, at LagLoad of the append maximum.
	lagInterval
)

func (r *Report) lagConfig(ctx context.Context, o *Options, mode lagMode, maxRate float64) error {
	syncAlways := mode != lagInterval
	var name, syncDesc, of string
	switch mode {
	case lagSync:
		name, syncDesc, of = "lag, sync_interval always (the default)", "sync_interval always", "append_sync maximum (AppendMany through the group commit)"
	case lagIngest:
		name, syncDesc, of = "lag, sync_interval always, group commit", "sync_interval always, group commit", "ingest maximum (appends through the group commit)"
	default:
		name, syncDesc = "lag, sync_interval "+DefaultSyncInterval.String(), "sync_interval "+DefaultSyncInterval.String()
		of = "append maximum (per-message publishes)"
	}
	if maxRate == 0 && o.LagRate == 0 {
		var err error
		switch mode {
		case lagIngest:
			var evs []event
			if evs, err = generate(0, o.IngestEvents, o.PadTo); err == nil {
				maxRate, err = ingestLedger(ctx, o, evs)
			}
		default:
			proposals := o.Proposals
			if syncAlways {
				proposals = o.SyncProposals
			}
			var evs []event
			if evs, err = generate(proposals, 0, o.PadTo); err == nil {
				maxRate, err = appendLedger(ctx, o, evs, syncAlways)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: maximum rate: %w", name, err)
		}
		progress(o, "%s: maximum rate %.0f/s (one run)", name, maxRate)
	}
	rate, asked := LagLoad*maxRate, fmt.Sprintf("%.0f%% of the measured %s", LagLoad*100, of)
	if o.LagRate > 0 {
		rate, asked = o.LagRate, "fixed by --lag-rate"
	}
	n := int(math.Ceil(rate * o.Duration.Seconds()))
	progress(o, "%s: generating %d events to append at %.0f/s for %v", name, n, rate, o.Duration)
	rs := generateRaws(n, o.PadTo)
	var p50, p99, rates []float64
	for rep := range o.Reps {
		res, err := measureLag(ctx, o, rs, rate, mode)
		if err != nil {
			return fmt.Errorf("%s, repetition %d: %w", name, rep+1, err)
		}
		progress(o, "%s rep %d/%d: p50 %v p99 %v at %.0f/s (%d events)", name, rep+1, o.Reps, res.p50, res.p99, res.rate, res.events)
		p50, p99, rates = append(p50, ms(res.p50)), append(p99, ms(res.p99)), append(rates, res.rate)
	}
	desc := fmt.Sprintf("whole ledger, %s, %.0f events/s asked = %s, achieved %s/s, %v per repetition",
		syncDesc, rate, asked, formatValue(median(rates), unitRate), o.Duration)
	r.Rows = append(r.Rows,
		Row{Figure: "live lag p50: folded − acknowledged (" + desc + ")", Unit: unitMs, Values: p50},
		Row{Figure: "live lag p99 (" + syncDesc + ")", Unit: unitMs, Values: p99, Target: fmt.Sprintf("< %v", TargetLagP99)},
	)
	r.Rows[len(r.Rows)-1].verdict(median(p99) < ms(TargetLagP99))
	return nil
}

// readsFigure measures GET and list latencies over HTTP.
func (r *Report) readsFigure(ctx context.Context, o *Options) error {
	env, err := startReads(ctx, o)
	if err != nil {
		return err
	}
	defer env.close()
	var gp50, gp99, lp50, lp99, ep50, ep99 []float64
	for rep := range o.Reps {
		res, err := env.measure(ctx, rep, o.Gets, o.Lists)
		if err != nil {
			return fmt.Errorf("reads, repetition %d: %w", rep+1, err)
		}
		progress(o, "reads rep %d/%d: GET p50 %v p99 %v; list p50 %v p99 %v; events p50 %v p99 %v", rep+1, o.Reps, res.getP50, res.getP99, res.listP50, res.listP99, res.evP50, res.evP99)
		ep50, ep99 = append(ep50, ms(res.evP50)), append(ep99, ms(res.evP99))
		gp50, gp99 = append(gp50, ms(res.getP50)), append(gp99, ms(res.getP99))
		lp50, lp99 = append(lp50, ms(res.listP50)), append(lp99, ms(res.listP99))
	}
	store := fmt.Sprintf("%d proposals, %d events", o.ReadProposals, env.events)
	r.Rows = append(r.Rows,
		Row{Figure: fmt.Sprintf("GET /v1/proposals/{id} p50 (loopback HTTP, %s; %d requests per repetition)", store, o.Gets), Unit: unitMs, Values: gp50},
		Row{Figure: "GET /v1/proposals/{id} p99", Unit: unitMs, Values: gp99, Target: fmt.Sprintf("< %v", TargetGetP99)},
		Row{Figure: fmt.Sprintf("list p50 (limit=100, state filter, first 10 pages of each state; %d requests per repetition)", o.Lists), Unit: unitMs, Values: lp50},
		Row{Figure: "list p99", Unit: unitMs, Values: lp99, Target: fmt.Sprintf("< %v", TargetListP99)},
	)
	r.Rows[len(r.Rows)-3].verdict(median(gp99) < ms(TargetGetP99))
	r.Rows[len(r.Rows)-1].verdict(median(lp99) < ms(TargetListP99))
	r.Rows = append(r.Rows,
		Row{Figure: fmt.Sprintf("GET /v1/events p50 (limit=100, type/effect/kind filters, both orders, from a random sequence; %d requests per repetition)", o.Lists), Unit: unitMs, Values: ep50},
		Row{Figure: "GET /v1/events p99 (filtered page)", Unit: unitMs, Values: ep99, Target: fmt.Sprintf("< %v", TargetEventsP99)},
	)
	r.Rows[len(r.Rows)-1].verdict(median(ep99) < ms(TargetEventsP99))
	return nil
}

// memoryFigure measures peak RSS of fold children at each o.MemEvents.
// The smallest N runs o.Reps times and the others once (in full mode each
// may take the whole budget).
func (r *Report) memoryFigure(ctx context.Context, o *Options) error {
	var first, last float64
	for i, n := range o.MemEvents {
		reps := o.Reps
		if i > 0 {
			reps = 1
		}
		var hwm []float64
		reached := n
		var lastRes ChildResult
		for rep := range reps {
			res, err := runChild(ctx, o, n, o.MemBudget)
			if err != nil {
				return fmt.Errorf("memory, %d events, repetition %d: %w", n, rep+1, err)
			}
			lastRes = res
			progress(o, "memory %d events rep %d/%d: VmHWM %.1f MiB, %d events folded in %.1fs", n, rep+1, reps, float64(res.VmHWMKiB)/1024, res.Events, res.Seconds)
			hwm = append(hwm, float64(res.VmHWMKiB)/1024)
			reached = min(reached, res.Events)
		}
		label := fmt.Sprintf("peak RSS (VmHWM) folding %d events", reached)
		if reached < n {
			label += fmt.Sprintf(" (%d asked; the %v budget ran out)", n, o.MemBudget)
		}
		if i == 0 {
			label += ", child process, direct fold into a fresh store"
		}
		row := Row{Figure: label, Unit: unitMiB, Values: hwm, Target: fmt.Sprintf("< %d MiB", TargetRSSMiB)}
		row.verdict(slicesMax(hwm) < TargetRSSMiB)
		r.Rows = append(r.Rows, row)
		r.Notes = append(r.Notes, fmt.Sprintf("memory at the end of folding %d events (last repetition; the peak adds collection headroom and flushes): "+
			"Go heap in use %.0f MiB of %.0f MiB the runtime holds, Pebble block cache %.0f MiB, %d sstables.",
			lastRes.Events, float64(lastRes.GoHeapInuseKiB)/1024, float64(lastRes.GoSysKiB)/1024, float64(lastRes.BlockCacheKiB)/1024, lastRes.Tables))
		m := median(hwm)
		if i == 0 {
			first = m
		}
		last = m
	}
	if len(o.MemEvents) > 1 {
		growth := (last - first) / first
		row := Row{
			Figure: fmt.Sprintf("peak RSS growth from %d to %d events", o.MemEvents[0], o.MemEvents[len(o.MemEvents)-1]),
			Unit:   unitPct, Values: []float64{growth * 100}, Single: true,
			Target: fmt.Sprintf("flat (≤ %+.0f%%)", FlatGrowth*100),
		}
		row.verdict(growth <= FlatGrowth)
		r.Rows = append(r.Rows, row)
	}
	return nil
}

func slicesMax(xs []float64) float64 {
	_, m := minMax(xs)
	return m
}

// avgSize is the mean envelope size of evs.
func avgSize(evs []event) int {
	if len(evs) == 0 {
		return 0
	}
	t := 0
	for _, e := range evs {
		t += len(e.raw)
	}
	return t / len(evs)
}

// foldMode names how the fold figure's store commits.
func foldMode(o *Options) string {
	if o.FoldWAL {
		return "WAL synced per commit"
	}
	return "no WAL, as ledger rebuild"
}
