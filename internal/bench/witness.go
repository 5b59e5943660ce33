package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/litewitness"
	"github.com/mewledger/ledger/internal/monitor"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/witness"
)

// The witnesses and the monitor (contract §16, issue 34): the monitor's
// verified entries per second; checkpoints per second cosigned by two real
// litewitness witnesses (quorum 2) against signed ones without witnesses;
// ingest and fold with two witnesses on against off. The figure builds
// litewitness (filippo.io/torchwood v0.6.1, from the module proxy) and
// runs it, so it runs only when asked: `ledger bench --only witness`
// (never in a run of every figure, nor in --quick's CI run).

// FigWitness is the witnesses' and monitor's figure; it runs only when
// named in Options.Only.
const FigWitness = "witness"

// OptInFigures are the figures that run only when named in Options.Only.
var OptInFigures = []string{FigWitness}

// TargetWitnessCost: ingest and fold with two witnesses at least 97% of
// the rate without (within 3%).
const TargetWitnessCost = 0.97

// witnessInterval is the checkpoint interval of the witness figure.
const witnessInterval = 50 * time.Millisecond

// benchT is the witness kit's T outside a test: a Fatal panics with a
// benchFatal, which witnessFigure turns into its error.
type benchT struct {
	dir      string
	cleanups []func()
}

type benchFatal struct{ msg string }

func (*benchT) Helper()                   {}
func (*benchT) Fatal(args ...any)         { panic(benchFatal{fmt.Sprint(args...)}) }
func (*benchT) Fatalf(f string, a ...any) { panic(benchFatal{fmt.Sprintf(f, a...)}) }
func (b *benchT) Cleanup(f func())        { b.cleanups = append(b.cleanups, f) }
func (b *benchT) TempDir() string {
	d, err := os.MkdirTemp(b.dir, "witness-*")
	if err != nil {
		panic(benchFatal{err.Error()})
	}
	return d
}

func (b *benchT) close() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	b.cleanups = nil
}

// witnessSetup is a checkpoint key and two running witnesses of it.
type witnessSetup struct {
	t       *benchT
	keyFile string
	ws      []witness.Witness
}

// newWitnesses makes a key (origin bench.example/<n>) and starts two
// litewitness for it.
func newWitnesses(o *Options, n int) (s *witnessSetup, err error) {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-witness-*")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	t := &benchT{dir: dir}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(benchFatal)
			if !ok {
				panic(p)
			}
			t.close()
			s, err = nil, fmt.Errorf("bench: witness: %s", f.msg)
		}
	}()
	origin := fmt.Sprintf("bench.example/ledger-%d", n)
	keyFile := filepath.Join(dir, "checkpoint.key")
	skey, err := proofs.GenerateKeyFile(keyFile, origin)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	vkey, err := evidence.VerifierKeyOf(skey)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	s = &witnessSetup{t: t, keyFile: keyFile}
	for _, name := range []string{"witness.example/one", "witness.example/two"} {
		w := litewitness.Start(t, name, origin, vkey)
		p, err := witness.Parse(w.Flag())
		if err != nil {
			t.close()
			return nil, fmt.Errorf("bench: %w", err)
		}
		s.ws = append(s.ws, p)
	}
	return s, nil
}

// edit returns the app options of a ledger with the key and, when on, the
// witnesses (quorum 2).
func (s *witnessSetup) edit(on bool) func(*app.Options) {
	return func(ao *app.Options) {
		ao.CheckpointInterval = witnessInterval
		ao.CheckpointKeyFile = s.keyFile
		if on {
			ao.Witnesses = s.ws
			ao.WitnessQuorum = 2
		}
	}
}

// witnessFigure measures the witness figure.
func (r *Report) witnessFigure(ctx context.Context, o *Options) error {
	if err := r.monitorRow(ctx, o); err != nil {
		return err
	}
	return r.witnessedRows(ctx, o)
}

// monitorRow: a ledger of IngestEvents events, signed; a monitor with an
// empty state directory copies and verifies all of it (one Check).
func (r *Report) monitorRow(ctx context.Context, o *Options) error {
	evs, err := generate(0, o.IngestEvents, o.PadTo)
	if err != nil {
		return err
	}
	progress(o, "witness: the monitor verifying %d events (~%d bytes each)", len(evs), avgSize(evs))
	a, stop, err := startApp(ctx, o, func(ao *app.Options) { ao.CheckpointInterval = witnessInterval })
	if err != nil {
		return err
	}
	defer stop()
	if err := streamEvents(ctx, a, evs); err != nil {
		return err
	}
	if err := waitCheckpoint(ctx, a, int64(len(evs)), false); err != nil {
		return err
	}
	var vals []float64
	for range o.Reps {
		dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-monitor-*")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		m, err := monitor.Open(ctx, monitor.Options{URL: a.HTTPURL(), VerifierKey: a.Proofs().VerifierKey(), StateDir: dir, Logger: o.Logger})
		if err != nil {
			_ = os.RemoveAll(dir)
			return err
		}
		start := time.Now()
		res, err := m.Check(ctx)
		took := time.Since(start)
		_ = m.Close()
		_ = os.RemoveAll(dir)
		if err != nil || res.Entries != int64(len(evs)) {
			return fmt.Errorf("bench: monitor verified %d of %d: %v", res.Entries, len(evs), err)
		}
		vals = append(vals, float64(res.Entries)/took.Seconds())
	}
	r.Rows = append(r.Rows, Row{
		Figure: fmt.Sprintf("witness: monitor, verified entries/s (consistency from tiles, entry bundles over loopback HTTP, every leaf hash, decoding, root, the copy written and synced; %d events, ~%d B, %d bundles at once)",
			len(evs), avgSize(evs), monitor.DefaultParallel),
		Unit: unitRate, Values: vals,
	})
	return nil
}

// witnessRun is one ledger's ingest of evs (acknowledged), its fold, and
// its checkpoints (witnessed when the witnesses are on, else signed) per
// second while it ingested.
type witnessRun struct{ ingest, fold, checkpoints float64 }

func runWitnessed(ctx context.Context, o *Options, evs []event, s *witnessSetup, on bool) (witnessRun, error) {
	a, stop, err := startApp(ctx, o, s.edit(on))
	if err != nil {
		return witnessRun{}, err
	}
	defer stop()
	log := a.Proofs().Log()
	counted := make(chan int, 1)
	cctx, cancel := context.WithCancel(ctx)
	go func() { // counts the checkpoints made while ingesting and folding
		n := 0
		for {
			ch := log.Changed()
			if on {
				ch = log.WitnessedChanged()
			}
			select {
			case <-cctx.Done():
				counted <- n
				return
			case <-ch:
				n++
			}
		}
	}()
	start := time.Now()
	err = streamEvents(ctx, a, evs)
	ingested := time.Since(start)
	if err == nil {
		err = a.Store().WaitApplied(ctx, uint64(len(evs)))
	}
	folded := time.Since(start)
	cancel()
	n := <-counted
	if err != nil {
		return witnessRun{}, err
	}
	if err := waitCheckpoint(ctx, a, int64(len(evs)), on); err != nil {
		return witnessRun{}, err
	}
	return witnessRun{ingest: float64(len(evs)) / ingested.Seconds(), fold: float64(len(evs)) / folded.Seconds(), checkpoints: float64(n) / folded.Seconds()}, nil
}

// witnessedRows: the same ingest (HTTP NDJSON, sync always) into a ledger
// with two witnesses (quorum 2) and into one without, alternating, each
// repetition with witnesses of its own (a new log for them).
func (r *Report) witnessedRows(ctx context.Context, o *Options) error {
	evs, err := generate(0, o.IngestEvents, o.PadTo)
	if err != nil {
		return err
	}
	progress(o, "witness: ingest and fold of %d events with two litewitness (quorum 2) and without; building litewitness %s", len(evs), litewitness.LitewitnessVersion)
	var on, off []witnessRun
	for rep := range o.Reps {
		s, err := newWitnesses(o, rep)
		if err != nil {
			return err
		}
		order := []bool{true, false}
		if rep%2 == 1 {
			order = []bool{false, true}
		}
		for _, w := range order {
			run, err := runWitnessed(ctx, o, evs, s, w)
			if err != nil {
				s.t.close()
				return err
			}
			if w {
				on = append(on, run)
			} else {
				off = append(off, run)
			}
		}
		s.t.close()
	}
	pick := func(rs []witnessRun, f func(witnessRun) float64) []float64 {
		out := make([]float64, len(rs))
		for i, x := range rs {
			out[i] = f(x)
		}
		return out
	}
	cps := Row{
		Figure: fmt.Sprintf("witness: checkpoints/s cosigned by two litewitness (quorum 2) while %d events are ingested and folded (checkpoint interval %v)", len(evs), witnessInterval),
		Unit:   "checkpoints/s", Values: pick(on, func(x witnessRun) float64 { return x.checkpoints }),
		Baseline: pick(off, func(x witnessRun) float64 { return x.checkpoints }), BaseName: "signed checkpoints/s without witnesses",
	}
	cps.ratios()
	r.Rows = append(r.Rows, cps)
	for _, c := range []struct {
		what string
		f    func(witnessRun) float64
	}{
		{"ingest: events/s acknowledged, HTTP NDJSON as `ledger publish -f` (sync_interval always)", func(x witnessRun) float64 { return x.ingest }},
		{"fold: events/s from the first append to the last folded", func(x witnessRun) float64 { return x.fold }},
	} {
		row := Row{
			Figure:   fmt.Sprintf("witness: %s, two witnesses on (%d events)", c.what, len(evs)),
			Unit:     unitRate,
			Values:   pick(on, c.f),
			Baseline: pick(off, c.f),
			BaseName: "the same without witnesses",
			Target:   fmt.Sprintf("ratio ≥ %.2f (within %.0f%%)", TargetWitnessCost, (1-TargetWitnessCost)*100),
		}
		row.ratios()
		row.verdict(median(row.Ratios) >= TargetWitnessCost)
		r.Rows = append(r.Rows, row)
	}
	return nil
}

// streamEvents appends evs through the HTTP API in one NDJSON stream.
func streamEvents(ctx context.Context, a *app.App, evs []event) error {
	cl, err := client.New(a.HTTPURL())
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	var body bytes.Buffer
	for _, e := range evs {
		body.Write(e.raw)
		body.WriteByte('\n')
	}
	n := 0
	err = cl.AppendStream(ctx, &body, func(r api.AppendResult) error {
		n++
		if r.Error != nil || r.Seq == 0 {
			return fmt.Errorf("bench: line %d: %+v", r.Line, r)
		}
		return nil
	}, client.WithSpace(space))
	if err == nil && n != len(evs) {
		err = fmt.Errorf("bench: %d answers for %d lines", n, len(evs))
	}
	return err
}

// waitCheckpoint waits (at most a minute) for a checkpoint of size n,
// witnessed or signed.
func waitCheckpoint(ctx context.Context, a *app.App, n int64, witnessed bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	log := a.Proofs().Log()
	for {
		ch := log.Changed()
		e, ok := log.Latest()
		if witnessed {
			ch = log.WitnessedChanged()
			e, ok = log.Witnessed()
		}
		if ok && e.Checkpoint.Size >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: no checkpoint of %d leaves (witnessed %t) after a minute: %w", n, witnessed, ctx.Err())
		case <-ch:
		}
	}
}
