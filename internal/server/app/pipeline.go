package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

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
	base              context.Context
	failed            func(name string, err error)
	emu               sync.Mutex // stopExp and expDone, which startExpirer replaces
}

// newPipeline makes the projector and expirer of store (not started).
func (a *App) newPipeline(store *projections.Store) (*pipeline, error) {
	p := &pipeline{store: store}
	var err error
	if p.proj, err = projector.New(a.js, store, projector.Options{
		Folder:  a.folder,
		Durable: a.opts.Durable,
		Logger:  a.opts.Logger.With().Str(logging.KeyComponent, "projector").Logger(),
		OnHold:  a.projectionHeld,
		// A stream deleted under the ledger is the log check's to name
		// (logcheck.go); the projector waits for it to be restored.
		WaitForStream: true,
		OnStreamGone:  a.streamGone,
		OnStorageFull: a.projectorStorageFull,
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
	var projCtx context.Context
	projCtx, p.stopProj = context.WithCancel(base)
	p.base, p.failed = base, failed
	p.projDone = make(chan struct{})
	go func() {
		defer close(p.projDone)
		if err := p.proj.Run(projCtx); err != nil {
			failed("projector", err)
		}
	}()
	p.startExpirer()
}

// startExpirer runs the expirer (again, once a log problem stopped it
// and has been got over: restore.go).
func (p *pipeline) startExpirer() {
	expCtx, stop := context.WithCancel(p.base)
	done := make(chan struct{})
	p.emu.Lock()
	p.stopExp, p.expDone = stop, done
	p.emu.Unlock()
	go func() {
		defer close(done)
		if err := p.exp.Run(expCtx); err != nil {
			p.failed("expirer", err)
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
	p.stopExpirer()
	p.stopProj()
	<-p.projDone
}

// stopExpirer stops the expirer and waits for it; safe to call again.
func (p *pipeline) stopExpirer() {
	p.emu.Lock()
	stop, done := p.stopExp, p.expDone
	p.emu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
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
