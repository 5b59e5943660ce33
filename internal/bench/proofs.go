package bench

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
)

// The verifiable log's figures (contract §16, issue 24): the fold with the
// Merkle tree against the same fold without it, the inclusion-proof
// latency over HTTP at ProofEvents events, and checkpoint signing and
// verification rates.

// FigProofs is the verifiable log's figure.
const FigProofs = "proofs"

// Targets of issue 24.
const (
	// TargetTreeFold: the fold with the tree at least 90% of the rate
	// without it (≤ 10% slower).
	TargetTreeFold     = 0.90
	TargetInclusionP99 = 5 * time.Millisecond
)

// Sizes of the proofs figure.
const (
	FullProofEvents  = 1_000_000
	QuickProofEvents = 20_000
)

// proofsFigure measures the proofs figure.
func (r *Report) proofsFigure(ctx context.Context, o *Options) error {
	if err := r.treeFoldRow(ctx, o); err != nil {
		return err
	}
	if err := r.scrubIngestRow(ctx, o); err != nil {
		return err
	}
	if err := r.inclusionRows(ctx, o); err != nil {
		return err
	}
	return r.signRows(o)
}

// treeFoldRow: projector.Rebuild of the fold figure's stream into a
// fresh store, with the tree against without (RebuildOptions.SkipTree).
func (r *Report) treeFoldRow(ctx context.Context, o *Options) error {
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
	evs = nil
	fold := func(skip bool) measure {
		return func(ctx context.Context) (float64, error) {
			dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-tree-*")
			if err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			defer os.RemoveAll(dir)
			store, err := projections.OpenStore(projections.StoreOptions{Dir: dir, Logger: o.Logger})
			if err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			defer store.Close()
			start := time.Now()
			last, err := projector.Rebuild(ctx, e.js, store, projector.RebuildOptions{SkipTree: skip})
			took := time.Since(start)
			if err != nil || last != uint64(n) {
				return 0, fmt.Errorf("bench: rebuild to %d of %d: %v", last, n, err)
			}
			return float64(n) / took.Seconds(), nil
		}
	}
	vals, base, err := paired(ctx, o, FigProofs+" fold", o.Reps, fold(false), fold(true))
	if err != nil {
		return err
	}
	row := Row{
		Figure:   fmt.Sprintf("proofs: fold with the Merkle tree, events/s (projector.Rebuild into a fresh store, %d events)", n),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: "the same fold without the tree",
		Target:   fmt.Sprintf("ratio ≥ %.2f (≤ %.0f%% slower)", TargetTreeFold, (1-TargetTreeFold)*100),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= TargetTreeFold)
	r.Rows = append(r.Rows, row)
	return r.scrubRows(ctx, o, e, n, fold(false))
}

// TargetScrubCost: the fold while a scrub pass runs at the default rate at
// least 95% of the fold without it (issue 33).
const TargetScrubCost = 0.95

// scrubRows (issue 33): the scrub's own rate (integrity.CheckRange
// unbounded over the stream against a tree of it), and the fold's rate
// while a full pass runs beside it at the default rate, against the same
// fold alone.
func (r *Report) scrubRows(ctx context.Context, o *Options, e *env, n int, foldOnce measure) error {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-scrub-*")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := projections.OpenStore(projections.StoreOptions{Dir: dir, Logger: o.Logger})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer store.Close()
	if last, err := projector.Rebuild(ctx, e.js, store, projector.RebuildOptions{}); err != nil || last != uint64(n) {
		return fmt.Errorf("bench: rebuild to %d of %d: %v", last, n, err)
	}
	var rates []float64
	for range o.Reps {
		start := time.Now()
		checked, d, err := integrity.CheckRange(ctx, e.js, store, 1, uint64(n), integrity.CheckOptions{Batch: 1024})
		if err != nil || d != nil || checked != uint64(n) {
			return fmt.Errorf("bench: scrub checked %d of %d: %v %v", checked, n, d, err)
		}
		rates = append(rates, float64(n)/time.Since(start).Seconds())
	}
	r.Rows = append(r.Rows, Row{
		Figure: fmt.Sprintf("proofs: scrub, messages/s (every leaf re-read from the stream and compared with the tree, unbounded; %d messages)", n),
		Unit:   unitRate, Values: rates,
	})
	withScrub := func(ctx context.Context) (float64, error) {
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		pace := func(ctx context.Context, k int) error {
			t := time.NewTimer(time.Duration(k) * time.Second / integrity.DefaultRate)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
		go func() {
			defer close(done)
			for sctx.Err() == nil {
				_, _, _ = integrity.CheckRange(sctx, e.js, store, 1, uint64(n), integrity.CheckOptions{Batch: 128, Pace: pace})
			}
		}()
		v, err := foldOnce(ctx)
		cancel()
		<-done
		return v, err
	}
	vals, base, err := paired(ctx, o, FigProofs+" fold while scrubbing", o.Reps, withScrub, foldOnce)
	if err != nil {
		return err
	}
	row := Row{
		Figure:   fmt.Sprintf("proofs: fold while a scrub pass runs at the default rate (%d msgs/s), events/s", integrity.DefaultRate),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: "the same fold with no scrub",
		Target:   fmt.Sprintf("ratio ≥ %.2f (≤ %.0f%% slower)", TargetScrubCost, (1-TargetScrubCost)*100),
	}
	row.ratios()
	row.verdict(median(row.Ratios) >= TargetScrubCost)
	r.Rows = append(r.Rows, row)
	return nil
}

// inclusionRows: a store of ProofEvents events folded through the
// Pipeline (tree included), a checkpoint signed, the real API serving
// GET /v1/proof/inclusion on loopback; Gets requests per repetition for
// random sequences.
func (r *Report) inclusionRows(ctx context.Context, o *Options) error {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-proofs-*")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := projections.OpenStore(projections.StoreOptions{Dir: dir + "/projection", Logger: o.Logger})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer store.Close()
	pl, err := projections.NewPipeline(store, projections.PipelineOptions{Presize: 1000})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	sg := newStreamGen(o.PadTo, genChunk)
	start := time.Now()
	for done := 0; done < o.ProofEvents; {
		evs := make([]fold.Event, 0, 1000)
		for len(evs) < cap(evs) && done < o.ProofEvents {
			ev, _, err := sg.next()
			if err != nil {
				_ = pl.Close()
				return err
			}
			evs = append(evs, ev)
			done++
		}
		if err := pl.Fold(evs, nil); err != nil {
			_ = pl.Close()
			return fmt.Errorf("bench: fold: %w", err)
		}
		if done%200_000 == 0 {
			progress(o, "proofs: %d events folded (%v)", done, time.Since(start).Round(time.Second))
		}
	}
	if err := pl.Close(); err != nil {
		return fmt.Errorf("bench: fold: %w", err)
	}
	skey, _, err := evidence.GenerateKey(crand.Reader, "bench/ledger")
	if err != nil {
		return err
	}
	svc, err := proofs.New(proofs.Options{SignerKey: skey, Dir: dir + "/checkpoints", Logger: o.Logger})
	if err != nil {
		return err
	}
	defer svc.Close()
	if _, err := svc.Checkpoint(store); err != nil {
		return err
	}
	progress(o, "proofs: tree of %d leaves, checkpoint signed, in %v", store.TreeSize(), time.Since(start).Round(time.Millisecond))
	a, err := api.New(api.Options{
		Reader:    store,
		StreamSeq: func(context.Context) (uint64, error) { return store.AppliedSeq(), nil },
		Proofs:    svc,
		Logger:    o.Logger,
	})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	env := &readsEnv{srv: &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}, served: make(chan error, 1)}
	go func() { env.served <- env.srv.Serve(ln) }()
	env.base = "http://" + ln.Addr().String()
	env.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer env.close() // the server and client only: store and dir are closed above

	n := store.TreeSize()
	var p50, p99 []float64
	for rep := range o.Reps {
		rng := rand.New(rand.NewPCG(seed, uint64(rep)+7))
		for range 50 { // warm the connection and the handler
			if _, err := env.get(ctx, fmt.Sprintf("/v1/proof/inclusion?seq=%d", 1+rng.Int64N(n)), nil); err != nil {
				return err
			}
		}
		lat := make([]time.Duration, o.Gets)
		for i := range lat {
			var ip evidence.InclusionProof
			d, err := env.get(ctx, fmt.Sprintf("/v1/proof/inclusion?seq=%d", 1+rng.Int64N(n)), &ip)
			if err != nil {
				return err
			}
			lat[i] = d
		}
		a50, a99 := durQuantile(lat, 0.5), durQuantile(lat, 0.99)
		progress(o, "proofs rep %d/%d: inclusion p50 %v p99 %v", rep+1, o.Reps, a50, a99)
		p50, p99 = append(p50, ms(a50)), append(p99, ms(a99))
	}
	r.Rows = append(r.Rows,
		Row{Figure: fmt.Sprintf("proofs: GET /v1/proof/inclusion p50 (loopback HTTP, a tree of %d leaves; %d requests per repetition)", n, o.Gets), Unit: unitMs, Values: p50},
		Row{Figure: "proofs: GET /v1/proof/inclusion p99", Unit: unitMs, Values: p99, Target: fmt.Sprintf("< %v", TargetInclusionP99)},
	)
	r.Rows[len(r.Rows)-1].verdict(median(p99) < ms(TargetInclusionP99))
	return nil
}

// signRows: checkpoints signed and opened (signature verified and parsed)
// per second, one goroutine, for a fifth of Duration each, per repetition.
func (r *Report) signRows(o *Options) error {
	skey, vkey, err := evidence.GenerateKey(crand.Reader, "bench/ledger")
	if err != nil {
		return err
	}
	signer, err := evidence.NewSigner(skey)
	if err != nil {
		return err
	}
	verifier, err := evidence.NewVerifier(vkey)
	if err != nil {
		return err
	}
	cp := evidence.Checkpoint{Origin: "bench/ledger", Size: 1_000_000}
	var signs, opens []float64
	for rep := range o.Reps {
		d := o.Duration / 5
		var signed []byte
		count, start := 0, time.Now()
		for time.Since(start) < d {
			cp.Size++
			cp.Hash[0] = byte(count)
			if signed, err = evidence.SignCheckpoint(cp, signer); err != nil {
				return err
			}
			count++
		}
		signs = append(signs, float64(count)/time.Since(start).Seconds())
		count, start = 0, time.Now()
		for time.Since(start) < d {
			if _, _, err := evidence.OpenCheckpoint(signed, verifier); err != nil {
				return err
			}
			count++
		}
		opens = append(opens, float64(count)/time.Since(start).Seconds())
		progress(o, "proofs rep %d/%d: %.0f checkpoints signed/s, %.0f verified/s", rep+1, o.Reps, signs[rep], opens[rep])
	}
	r.Rows = append(r.Rows,
		Row{Figure: "proofs: checkpoints signed per second (Ed25519 signed note, one core)", Unit: "/s", Values: signs},
		Row{Figure: "proofs: checkpoints verified per second (OpenCheckpoint: signature and parse, one core)", Unit: "/s", Values: opens},
	)
	return nil
}
