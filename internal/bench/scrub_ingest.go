package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/integrity"
)

// TargetScrubIngest: ingest while a full scrub pass runs at the default
// rate at least 95% of the same ingest with no pass running (issue 33).
const TargetScrubIngest = 0.95

// scrubIngestRow (issue 33): the scrub's cost to ingest. Each side starts
// a ledger (as `ledger serve`, fsync on every write), fills it with a log
// long enough that a full pass at the default rate outlasts the
// measurement and waits for it to be folded; the scrubbing side then
// starts a full pass (the tail's check of new messages runs on both
// sides, as in production) and both stream the ingest figure's events as
// `ledger publish -f` does.
func (r *Report) scrubIngestRow(ctx context.Context, o *Options) error {
	// One workload: the fill, then the measured events (no duplicates).
	nFill := max(o.IngestEvents/2, 20_000)
	all, err := generate(0, nFill+o.IngestEvents, o.PadTo)
	if err != nil {
		return err
	}
	fill, evs := all[:nFill], all[nFill:]
	side := func(scrub bool) measure {
		return func(ctx context.Context) (float64, error) {
			a, stop, err := startApp(ctx, o, func(ao *app.Options) {
				// No pass but the one started below.
				ao.ScrubPeriod = 1000 * time.Hour
			})
			if err != nil {
				return 0, err
			}
			defer stop()
			if _, err := ingestInto(ctx, a, fill); err != nil {
				return 0, err
			}
			if err := waitFor(ctx, func() bool { return a.Store().AppliedSeq() >= uint64(len(fill)) }); err != nil {
				return 0, fmt.Errorf("bench: scrub ingest: fill not folded: %w", err)
			}
			if scrub {
				a.Scrubber().Kick()
				if err := waitFor(ctx, func() bool { return a.Scrubber().Status().Position > 0 }); err != nil {
					return 0, fmt.Errorf("bench: scrub ingest: no pass started: %w", err)
				}
			}
			v, err := ingestInto(ctx, a, evs)
			if err != nil {
				return 0, err
			}
			if scrub && a.Scrubber().Status().Position == 0 {
				return 0, fmt.Errorf("bench: scrub ingest: the pass ended before the ingest did (fill %d messages)", len(fill))
			}
			return v, nil
		}
	}
	vals, base, err := paired(ctx, o, FigProofs+" ingest while scrubbing", o.Reps, side(true), side(false))
	if err != nil {
		return err
	}
	row := Row{
		Figure: fmt.Sprintf("proofs: ingest while a scrub pass runs at the default rate (%d msgs/s), events/s (HTTP NDJSON as `ledger publish -f`, sync always; %d events after %d)",
			integrity.DefaultRate, len(evs), len(fill)),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: "the same ingest with no scrub pass",
		Target:   fmt.Sprintf("ratio ≥ %.2f (≤ %.0f%% slower)", TargetScrubIngest, (1-TargetScrubIngest)*100),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= TargetScrubIngest)
	r.Rows = append(r.Rows, row)
	return nil
}

// waitFor polls cond every 10 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
