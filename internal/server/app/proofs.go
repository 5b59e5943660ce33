package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/proofs"
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
	return nil
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
	a.stopProofs = func() { cancel(); wg.Wait() }
}
