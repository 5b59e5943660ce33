package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// TargetCoverageCost is the most the fold's holes and coverage (contract
// §14 "Several recorders") may cost: the fold with them at least 97% as
// fast as without.
const TargetCoverageCost = 0.03

// coverageKeys seal and verify the marks of the coverage log.
var coverageKeys = func() *ledger.MarkKeys {
	k, err := ledger.NewMarkKeys([]byte("ledger bench coverage mark key!!"))
	if err != nil {
		panic(err)
	}
	return k
}()

// coverageEvents turns the bridge figure's proposals into the log of a
// MEW space recorded by three recorders: two live bridges storing in
// turns of 100 envelopes (each mark naming the envelope the session saw
// before), and a --history follower filling one envelope in 50 (answered
// duplicate for the rest); every 2,000 envelopes one live bridge's crash
// gap, then its next session.
func coverageEvents(props []event) ([]fold.Event, error) {
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	out := make([]fold.Event, 0, len(props)+len(props)/2000+1)
	sessions := map[string]int{"a": 1, "b": 1, "h": 1}
	var prev uint64
	add := func(raw []byte, mark string) error {
		seq := uint64(len(out) + 1)
		t := at.Add(time.Duration(seq) * time.Millisecond)
		d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t})
		if err != nil {
			return fmt.Errorf("bench: coverage log: %w", err)
		}
		ev := fold.Event{Seq: seq, Time: t, Raw: raw, Bridge: mark,
			Subject: subjects.Event{Space: space, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()}
		ev.BridgeSeal = coverageKeys.Seal(ev.Subject, mark, raw) // as the ledger's append path seals it
		out = append(out, ev)
		return nil
	}
	for i, e := range props {
		bridge := "a"
		if (i/100)%2 == 1 {
			bridge = "b"
		}
		history := i%50 == 49
		if history {
			bridge = "h"
		}
		if i > 0 && i%2000 == 0 {
			g := ledger.Gap{Bridge: "a", MEWSpace: "demo", LastSeq: prev, Session: fmt.Sprintf("a-%d", sessions["a"]),
				DisconnectedAt: at.Add(time.Duration(i) * time.Millisecond), Reason: "bench: crash"}
			g.ReconnectedAt = g.DisconnectedAt
			raw, err := ledger.GapEnvelope(g)
			if err != nil {
				return nil, err
			}
			if err := add(raw, ""); err != nil {
				return nil, err
			}
			sessions["a"]++
		}
		m := ledger.BridgeMark{Bridge: bridge, MEWSpace: "demo", Session: fmt.Sprintf("%s-%d", bridge, sessions[bridge]),
			Received: at, Prev: prev, Dups: int64(i / 2), History: history}
		if err := add(e.raw, m.String()); err != nil {
			return nil, err
		}
		prev = uint64(len(out))
	}
	return out, nil
}

// coverageFold folds evs into a fresh store in batches of 1,000 and
// returns events per second; without: fold.Folder.WithoutCoverage.
func coverageFold(ctx context.Context, o *Options, evs []fold.Event, without bool) (float64, error) {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-coverage-*")
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := projections.OpenStore(projections.StoreOptions{Dir: dir, Logger: o.Logger})
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer store.Close()
	f := &fold.Folder{WithoutCoverage: without, MarkKeys: coverageKeys}
	start := time.Now()
	for i := 0; i < len(evs); i += 1000 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		part := evs[i:min(i+1000, len(evs))]
		b := store.NewBatch()
		if err := f.Prepare(b, part); err != nil {
			b.Discard()
			return 0, fmt.Errorf("bench: prepare: %w", err)
		}
		for _, ev := range part {
			if _, err := f.Apply(b, ev); err != nil {
				b.Discard()
				return 0, fmt.Errorf("bench: fold seq %d: %w", ev.Seq, err)
			}
		}
		if err := b.Commit(part[len(part)-1].Seq); err != nil {
			b.Discard()
			return 0, fmt.Errorf("bench: commit: %w", err)
		}
		b.Discard()
	}
	return float64(len(evs)) / time.Since(start).Seconds(), nil
}

// coverageRow measures the fold's cost of holes and coverage on the log
// of three recorders of one MEW space (coverageEvents), paired with the
// same fold without them.
func (r *Report) coverageRow(ctx context.Context, o *Options, props []event) error {
	evs, err := coverageEvents(props)
	if err != nil {
		return err
	}
	with, without, err := paired(ctx, o, FigBridge+" coverage", o.Reps,
		func(ctx context.Context) (float64, error) { return coverageFold(ctx, o, evs, false) },
		func(ctx context.Context) (float64, error) { return coverageFold(ctx, o, evs, true) })
	if err != nil {
		return err
	}
	row := Row{
		Figure: fmt.Sprintf("bridge: fold of three recorders' log (%d messages: two live bridges, a follower, a crash gap per 2,000), events/s with holes and coverage", len(evs)),
		Unit:   unitRate, Values: with, Baseline: without, BaseName: "the same fold without them",
		Target: fmt.Sprintf("cost ≤ %.0f%% (ratio ≥ %.2f)", TargetCoverageCost*100, 1-TargetCoverageCost),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= 1-TargetCoverageCost)
	r.Rows = append(r.Rows, row)
	return nil
}
