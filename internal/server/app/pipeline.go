package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// pipeline is the projection in service: the Pebble store, the projector
// folding into it and the expirer reading its deadlines. An online
// rebuild stops one pipeline and starts another on the new store.
type pipeline struct {
	store *projections.Store
	proj  *projector.Projector
	exp   *projector.Expirer

	// Set by start.
	stopProj, stopExp context.CancelFunc
	projDone, expDone chan struct{}
}

// newPipeline makes the projector and expirer of store (not started).
func (a *App) newPipeline(store *projections.Store) (*pipeline, error) {
	p := &pipeline{store: store}
	var err error
	if p.proj, err = projector.New(a.js, store, projector.Options{
		Folder:  a.folder,
		Durable: a.opts.Durable,
		Logger:  a.opts.Logger.With().Str(logging.KeyComponent, "projector").Logger(),
		OnBatch: func(b projections.BatchInfo) {
			a.metrics.Folded(b.Events, b.Took)
			if a.opts.OnBatch != nil {
				a.opts.OnBatch(b)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if p.exp, err = projector.NewExpirer(store, a.appender, projector.ExpirerOptions{
		Interval: a.opts.ExpiryInterval,
		Logger:   a.opts.Logger.With().Str(logging.KeyComponent, "expirer").Logger(),
	}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return p, nil
}

// start runs the projector and the expirer; a failure of either is
// reported to failed (with the component's name).
func (p *pipeline) start(base context.Context, failed func(name string, err error)) {
	var projCtx, expCtx context.Context
	projCtx, p.stopProj = context.WithCancel(base)
	expCtx, p.stopExp = context.WithCancel(base)
	p.projDone, p.expDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.projDone)
		if err := p.proj.Run(projCtx); err != nil {
			failed("projector", err)
		}
	}()
	go func() {
		defer close(p.expDone)
		if err := p.exp.Run(expCtx); err != nil {
			failed("expirer", err)
		}
	}()
}

// stop stops the expirer (it appends), then the projector (it commits the
// batch in hand), and waits for both. It is a no-op on a pipeline never
// started, and safe to call twice.
func (p *pipeline) stop() {
	if p == nil || p.stopProj == nil {
		return
	}
	p.stopExp()
	<-p.expDone
	p.stopProj()
	<-p.projDone
}

// current returns the pipeline in service.
func (a *App) current() *pipeline {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	return a.pipe
}

func (a *App) setCurrent(p *pipeline) {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	a.pipe = p
}

// componentFailed logs a component's failure and shuts the ledger down.
func (a *App) componentFailed(name string, err error) {
	a.log.Error().Err(err).Str(logging.KeyComponent, name).Msg("component failed; shutting down")
	if a.fail != nil {
		a.fail(fmt.Errorf("app: %s: %w", name, err))
	}
}

// openStore opens the projection directory.
func (a *App) openStore() (*projections.Store, error) {
	s, err := projections.OpenStore(projections.StoreOptions{Dir: a.opts.ProjectionDir(), MemTableSize: a.disk.memTable,
		BeforeCommit: a.projectionRoom,
		Logger:       a.opts.Logger.With().Str(logging.KeyComponent, "pebble").Logger()})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return s, nil
}

// prepareDirs makes <data>/tmp (temporary projections of as-of reads and
// verify) and removes what an interrupted run left: temporary projections,
// and the half-built <data>/projection.new of an interrupted online
// rebuild. Nothing else may use these while the ledger runs on <data>.
func (a *App) prepareDirs() error {
	tmp := a.opts.TmpDir()
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ledger-at-") || strings.HasPrefix(e.Name(), "ledger-verify-") {
			if err := os.RemoveAll(filepath.Join(tmp, e.Name())); err != nil {
				return fmt.Errorf("app: remove leftover %s: %w", e.Name(), err)
			}
		}
	}
	if err := repair.RemoveLeftovers(a.opts.ProjectionDir(), a.log); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	return nil
}

// storedIndex is the appender's index of stored envelopes
// (appendlog.Index): the projection in service, whichever an online rebuild
// has swapped in. While a swap closes the old store, lookups fail with
// projections.ErrClosed and the appender looks the envelopes up in the
// log instead.
type storedIndex struct{ a *App }

func (x storedIndex) FirstStored(ids []ledger.Identity, seqs []uint64) (uint64, error) {
	p := x.a.current()
	if p == nil {
		return 0, projections.ErrClosed
	}
	return p.store.FirstStored(ids, seqs)
}
