package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/internal/server/metrics"
)

// The log checks itself (contract §16, package integrity): the scrub
// re-reads the stream while the ledger serves and reports damage to
// a.damage, which /readyz, /v1/status, the console, the proof routes and
// the signer read. Damage does not stop the fold (the projection is a
// function of the log as it stands) nor the reads (each marked with
// api.HeaderLogDamaged); it is cleared, with no restart, when the
// damaged sequence checks good again. The scrub is a goroutine of Run's,
// stopped with the log check.

// openScrub makes the scrubber and registers its metrics; called by New.
func (a *App) openScrub() error {
	var err error
	if a.scrub, err = integrity.NewScrubber(integrity.ScrubOptions{
		JS:           a.js,
		Tree:         func() integrity.Tree { return a.Store() },
		State:        a.damage,
		Period:       a.opts.ScrubPeriod,
		Rate:         a.opts.ScrubRate,
		TailInterval: a.opts.CheckpointInterval,
		Logger:       a.opts.Logger,
	}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	reg := a.metrics.Registry()
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: name, Help: help}, f))
	}
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Name: name, Help: help}, f))
	}
	st := a.scrub.Status
	counter("scrub_checked_messages_total", "Messages the scrub re-read and checked against the tree.", func() float64 { return float64(st().Checked) })
	counter("scrub_passes_total", "Full scrub passes completed.", func() float64 { return float64(st().Passes) })
	counter("scrub_findings_total", "Damage the scrub and the proofs found in the log.", func() float64 { return float64(a.damage.Findings()) })
	gauge("scrub_position_seq", "Next sequence the full scrub pass in hand reads (0: none running).", func() float64 { return float64(st().Position) })
	gauge("scrub_checked_through_seq", "Sequence through which every message folded since the start was checked.", func() float64 { return float64(st().CheckedThrough) })
	gauge("log_damaged_seq", "The first damaged or missing sequence of the log (0: none).", func() float64 {
		if d, ok := a.damage.Current(); ok {
			return float64(d.Seq)
		}
		return 0
	})
	gauge("projection_held_seq", "Sequence the projection is held at because the next one is missing from the stream (0: not held).", func() float64 {
		if h := a.ProjectionHeld(); h != nil {
			return float64(h.Seq)
		}
		return 0
	})
	gauge("signing_stopped", "1 while checkpoint signing is stopped at the last good size (log damage), else 0.", func() float64 {
		if a.proofs.SigningStopped() != nil {
			return 1
		}
		return 0
	})
	gauge("checkpoint_size", "Tree size of the latest signed checkpoint (-1: none yet).", func() float64 {
		if e, ok := a.proofs.Log().Latest(); ok {
			return float64(e.Checkpoint.Size)
		}
		return -1
	})
	return nil
}

// LogDamage returns the damage found in the log, false when none.
func (a *App) LogDamage() (api.LogDamage, bool) { return a.damage.Current() }

// Scrubber returns the scrub.
func (a *App) Scrubber() *integrity.Scrubber { return a.scrub }
