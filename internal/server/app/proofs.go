package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/witness"
)

// The verifiable log (contract §16): the checkpoint key, the signer and the
// proofs (package proofs). The signer is a goroutine of its own, started
// by Run after the projector and stopped after it (so that the last
// batch folded gets its checkpoint), with its own cancel and wait.

// openProofs loads (or, at the default path, generates) the checkpoint
// key and opens the proofs service; called by New.
func (a *App) openProofs() error {
	path, isDefault := a.opts.CheckpointKey()
	skey, created, err := proofs.LoadOrGenerateKey(path, a.opts.CheckpointOrigin, isDefault)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	if a.proofs, err = proofs.New(proofs.Options{
		SignerKey: skey,
		Dir:       a.opts.CheckpointsDir(),
		Tree:      func() proofs.Tree { return a.Store() },
		Conn:      a.nc,
		JS:        a.js,
		Interval:  a.opts.CheckpointInterval,
		Integrity: a.damage,
		Logger:    a.opts.Logger,
	}); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	ev := a.log.Info()
	if created {
		ev = ev.Bool("generated", true)
	}
	ev.Str(logging.KeyComponent, "checkpoints").Str("key_file", path).Str("origin", a.proofs.Origin()).
		Str("verifier_key", a.proofs.VerifierKey()).Msg("checkpoint key")
	a.stopProofs = func() {}
	if len(a.opts.Witnesses) > 0 {
		var maxBackoff time.Duration // default
		if a.opts.WitnessBackoff > 0 {
			maxBackoff = 20 * a.opts.WitnessBackoff
		}
		if a.witnesses, err = witness.New(witness.Options{Witnesses: a.opts.Witnesses, Quorum: a.opts.WitnessQuorum,
			Proofs: a.proofs, Tree: func() proofs.Tree { return a.Store() }, MinBackoff: a.opts.WitnessBackoff,
			MaxBackoff: maxBackoff, Logger: a.opts.Logger}); err != nil {
			return fmt.Errorf("app: %w", err)
		}
		a.proofs.UseWitnesses()
		a.metrics.Registry().MustRegister(a.witnesses.Collector())
	}
	return nil
}

// Witnesses returns the witness submitter, nil when the ledger asks no
// witnesses.
func (a *App) Witnesses() *witness.Submitter { return a.witnesses }

// witnessing and witnessAlarm feed the API (nil-safe).
func (a *App) witnessing() *api.Witnessing {
	if a.witnesses == nil {
		return nil
	}
	return a.witnesses.Witnessing()
}

func (a *App) witnessAlarm() string {
	if a.witnesses == nil {
		return ""
	}
	return a.witnesses.Alarm()
}

// Proofs returns the checkpoints and proofs service.
func (a *App) Proofs() *proofs.Service { return a.proofs }

// startProofs starts the signer; stopProofs cancels it and waits.
func (a *App) startProofs(base context.Context) {
	ctx, cancel := context.WithCancel(base)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.proofs.Run(ctx); err != nil {
			a.componentFailed("checkpoints", err)
		}
	}()
	if a.witnesses != nil {
		// The witness submitter stops with the signer.
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = a.witnesses.Run(ctx)
		}()
	}
	a.stopProofs = func() { cancel(); wg.Wait() }
}
