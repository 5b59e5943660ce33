package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/mewledger/ledger/internal/server/integrity"
	"os"
	"sync"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/ops/repair"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// Online operations (contract §9) on the running ledger: the App implements
// httpapi.Ops. One operation runs at a time (a second is httpapi.ErrBusy).
//
// Online rebuild, in the background:
//
//  1. fold: the whole log into <data>/projection.new (repair.RebuildInto)
//     while the service answers from the live projection;
//  2. catch_up: fold what was appended meanwhile (projector.Rebuild
//     resumes from the new store's checkpoint) until the new copy is
//     within RebuildSwapLag events of the end of the log (a few passes
//     at most);
//  3. swap: pause the projector (reads still answer, from the old store),
//     fold the last events, stop the projector and the expirer, and
//     under the API reader's write lock (reads wait a few milliseconds,
//     none fails) close both stores, exchange the directories
//     (repair.Replace: Pebble never has a renamed directory open) and
//     open the new projection at <data>/projection; then start a
//     projector and an expirer on it. The new store is at least as far
//     as the old one was, so a read never goes back in time.
//
// A failure before the swap leaves the live projection serving and
// removes the copy; a failure during the swap that leaves no store to
// serve from shuts the ledger down (a restart refolds what is missing).
// Shutdown cancels a rebuild before its swap; a swap begun completes.

// rebuildMaxPasses bounds the catch-up passes before the swap (appends
// faster than the fold: the final pass, with the projector paused, folds
// the rest).
const rebuildMaxPasses = 5

// swapTimeout bounds the swap phase (the last fold included).
const swapTimeout = 5 * time.Minute

// Operation names of the busy message.
const (
	opRebuild = "rebuild"
	opVerify  = "verify"
)

// acquireOp marks op as running, or returns httpapi.ErrBusy (another runs)
// or httpapi.ErrCannotOperate (with the reason).
func (a *App) acquireOp(op string) error {
	select {
	case <-a.ready:
	default:
		return fmt.Errorf("%w: the ledger is not serving yet", httpapi.ErrCannotOperate)
	}
	// A damaged log (contract §16): a rebuild would sign nothing of a
	// rewritten tree and a verify would compare with damage; 409
	// log_damaged naming it.
	if d, ok := a.damage.Current(); ok {
		return &integrity.DamagedError{Damage: d}
	}
	// A log that no longer matches the projection: fail at once, saying
	// why (a verify or rebuild would wait for history that is gone).
	ctx, cancel := context.WithTimeout(a.opsCtx, 10*time.Second)
	problem, err := a.checkLog(ctx)
	cancel()
	switch {
	case problem != "":
		return fmt.Errorf("%w: %w: %s", httpapi.ErrCannotOperate, ErrLogProblem, problem)
	case err != nil:
		return fmt.Errorf("%w: cannot check the log: %w", httpapi.ErrCannotOperate, err)
	}
	a.opsMu.Lock()
	defer a.opsMu.Unlock()
	switch {
	case a.opsClosed:
		return fmt.Errorf("%w: the ledger is shutting down", httpapi.ErrCannotOperate)
	case a.opsBusy != "":
		return fmt.Errorf("%w: a %s is running", httpapi.ErrBusy, a.opsBusy)
	}
	a.opsBusy = op
	a.opsWG.Add(1)
	return nil
}

func (a *App) releaseOp() {
	a.opsMu.Lock()
	a.opsBusy = ""
	a.opsMu.Unlock()
	a.opsWG.Done()
}

// stopOps refuses new operations, cancels the running one and waits for
// it.
func (a *App) stopOps() {
	a.opsMu.Lock()
	a.opsClosed = true
	a.opsMu.Unlock()
	a.opsCancel()
	a.opsWG.Wait()
}

// StartRebuild starts an online rebuild in the background (httpapi.Ops).
func (a *App) StartRebuild() (api.RebuildStatus, error) {
	if err := a.acquireOp(opRebuild); err != nil {
		return a.RebuildStatus(), err
	}
	now := time.Now().UTC()
	a.opsMu.Lock()
	a.rebuild = api.RebuildStatus{Running: true, Phase: api.RebuildFold, StartedAt: &now}
	a.rebuildCh = make(chan struct{})
	done := a.rebuildCh
	st := a.rebuild
	a.opsMu.Unlock()
	go func() {
		defer a.releaseOp()
		defer close(done)
		err := a.runRebuild(a.opsCtx, now)
		cancelled := err != nil && a.opsCtx.Err() != nil
		if cancelled {
			err = fmt.Errorf("cancelled by the shutdown: %w", err)
		}
		end := time.Now().UTC()
		a.opsMu.Lock()
		a.rebuild.Running, a.rebuild.FinishedAt = false, &end
		if err != nil {
			a.rebuild.Phase, a.rebuild.Error = api.RebuildFailed, err.Error()
		} else {
			a.rebuild.Phase = api.RebuildDone
		}
		st := a.rebuild
		a.opsMu.Unlock()
		ev := a.log.Info()
		switch {
		case cancelled:
			ev = a.log.Warn().Err(err)
		case err != nil:
			ev = a.log.Error().Err(err)
		}
		ev.Str(logging.KeyComponent, "rebuild").Uint64(logging.KeySeq, st.Seq).Uint64("events", st.Events).
			Float64("events_per_second", st.EventsPerSecond).Dur(logging.KeyTook, end.Sub(now)).Msg("online rebuild " + st.Phase)
	}()
	return st, nil
}

// RebuildStatus returns the running or last rebuild's status (httpapi.Ops).
func (a *App) RebuildStatus() api.RebuildStatus {
	a.opsMu.Lock()
	defer a.opsMu.Unlock()
	return a.rebuild
}

// WaitRebuild waits for the running rebuild, if any, to end (httpapi.Ops).
func (a *App) WaitRebuild(ctx context.Context) (api.RebuildStatus, error) {
	a.opsMu.Lock()
	ch := a.rebuildCh
	a.opsMu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return a.RebuildStatus(), ctx.Err()
		}
	}
	return a.RebuildStatus(), nil
}

// Rebuild runs an online rebuild and waits for it.
func (a *App) Rebuild(ctx context.Context) (api.RebuildStatus, error) {
	if _, err := a.StartRebuild(); err != nil {
		return a.RebuildStatus(), err
	}
	st, err := a.WaitRebuild(ctx)
	if err == nil && st.Phase == api.RebuildFailed {
		err = errors.New(st.Error)
	}
	return st, err
}

// rebuildProgress updates the status after each commit of the fold and
// logs a line every 5 s.
type rebuildProgress struct {
	a       *App
	start   time.Time
	mu      sync.Mutex
	lastLog time.Time
}

func (p *rebuildProgress) update(done, total uint64) {
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	p.a.opsMu.Lock()
	p.a.rebuild.Seq, p.a.rebuild.Target, p.a.rebuild.Events, p.a.rebuild.EventsPerSecond = done, total, done, rate
	phase := p.a.rebuild.Phase
	p.a.opsMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.lastLog) >= 5*time.Second {
		p.lastLog = time.Now()
		p.a.log.Info().Str(logging.KeyComponent, "rebuild").Str("phase", phase).Uint64(logging.KeySeq, done).
			Uint64("target", total).Float64("events_per_second", rate).Msg("online rebuild progress")
	}
}

func (a *App) setPhase(phase string) {
	a.opsMu.Lock()
	a.rebuild.Phase = phase
	a.opsMu.Unlock()
}

// runRebuild is the online rebuild (see the file comment).
func (a *App) runRebuild(ctx context.Context, started time.Time) error {
	dir := a.opts.ProjectionDir()
	newDir := dir + repair.NewDirSuffix
	prog := &rebuildProgress{a: a, start: started, lastLog: started}
	a.log.Info().Str(logging.KeyComponent, "rebuild").Str(logging.KeyDataDir, newDir).Msg("online rebuild started")
	if err := os.RemoveAll(newDir); err != nil {
		return fmt.Errorf("app: rebuild: remove leftover %s: %w", newDir, err)
	}
	// 1. fold
	ns, err := repair.RebuildInto(ctx, a.js, newDir, 0, repair.Options{Progress: prog.update, Folder: a.folder})
	if err != nil {
		return fmt.Errorf("app: rebuild: %w", err)
	}
	discard := func(err error) error {
		_ = ns.Close()
		_ = os.RemoveAll(newDir)
		return err
	}
	prog.update(ns.AppliedSeq(), ns.AppliedSeq())
	// 2. catch up
	a.setPhase(api.RebuildCatchUp)
	for range rebuildMaxPasses {
		last, err := a.streamSeq(ctx)
		if err != nil {
			return discard(fmt.Errorf("app: rebuild: %w", err))
		}
		if last <= ns.AppliedSeq()+uint64(a.opts.RebuildSwapLag) {
			break
		}
		if _, err := projector.Rebuild(ctx, a.js, ns, projector.RebuildOptions{Progress: prog.update, Folder: a.folder}); err != nil {
			return discard(fmt.Errorf("app: rebuild: catch up: %w", err))
		}
	}
	if err := ctx.Err(); err != nil {
		return discard(fmt.Errorf("app: rebuild: %w", err))
	}
	// 3. swap: from here on shutdown waits for it.
	a.setPhase(api.RebuildSwap)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), swapTimeout)
	defer cancel()
	old := a.current()
	old.proj.Pause()
	if _, err := projector.Rebuild(sctx, a.js, ns, projector.RebuildOptions{Progress: prog.update, Folder: a.folder}); err != nil {
		old.proj.Resume()
		return discard(fmt.Errorf("app: rebuild: last pass: %w", err))
	}
	old.stop()
	// A batch the projector had in hand when paused is committed by now;
	// its events were in the stream before the last pass read its end, so
	// the copy has them. Fold anything more, should the clock say otherwise.
	if ns.AppliedSeq() < old.store.AppliedSeq() {
		if _, err := projector.Rebuild(sctx, a.js, ns, projector.RebuildOptions{UpToSeq: old.store.AppliedSeq(), Folder: a.folder}); err != nil {
			a.restart(old)
			return discard(fmt.Errorf("app: rebuild: last pass: %w", err))
		}
	}
	var opened *projections.Store
	swapErr := a.api.SwapReader(func(httpapi.Reader) (httpapi.Reader, error) {
		var errs []error
		if err := ns.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := old.store.Close(); err != nil {
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			if err := repair.Replace(dir, newDir); err != nil {
				errs = append(errs, err)
			}
		}
		// Whatever is at dir now (the new projection, or the old one when
		// the exchange failed) serves.
		s, err := a.openStore()
		if err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		opened = s
		return s, errors.Join(errs...)
	})
	if opened == nil {
		err := fmt.Errorf("app: rebuild: swap: no projection left to serve from: %w", swapErr)
		a.componentFailed("rebuild", err)
		return err
	}
	p, err := a.newPipeline(opened)
	if err != nil {
		a.componentFailed("rebuild", err)
		return err
	}
	p.start(context.Background(), a.componentFailed)
	a.setCurrent(p)
	if swapErr != nil {
		_ = os.RemoveAll(newDir)
		return fmt.Errorf("app: rebuild: swap: %w", swapErr)
	}
	prog.update(opened.AppliedSeq(), opened.AppliedSeq())
	return nil
}

// restart starts a stopped pipeline's store again with a fresh projector
// and expirer (a swap abandoned after the old pipeline stopped).
func (a *App) restart(old *pipeline) {
	p, err := a.newPipeline(old.store)
	if err != nil {
		a.componentFailed("rebuild", err)
		return
	}
	p.start(context.Background(), a.componentFailed)
	a.setCurrent(p)
}

// Verify compares the live projection with a fold of the log up to its
// checkpoint (repair.Verify), with the projector paused meanwhile (appends
// go on; reads answer from the paused projection) (httpapi.Ops).
func (a *App) Verify(ctx context.Context) (api.VerifyResult, error) {
	if err := a.acquireOp(opVerify); err != nil {
		return api.VerifyResult{}, err
	}
	defer a.releaseOp()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOnShutdown := context.AfterFunc(a.opsCtx, cancel)
	defer stopOnShutdown()

	p := a.current()
	if !p.proj.Paused() { // paused by someone else: leave it so
		p.proj.Pause()
		defer p.proj.Resume()
	}
	start := time.Now()
	var res repair.VerifyResult
	var err error
	// A commit under way when Pause returned lands after it: if it lands
	// during the comparison, Verify says the projection moved; once the
	// projector is really idle, a second attempt cannot be disturbed.
	for attempt := 0; attempt < 3; attempt++ {
		seq := p.store.AppliedSeq()
		res, err = repair.Verify(ctx, a.js, p.store, repair.Options{TempDir: a.opts.TmpDir(), Folder: a.folder})
		if err == nil || errors.Is(err, repair.ErrMismatch) || p.store.AppliedSeq() == seq || ctx.Err() != nil {
			break
		}
	}
	out := api.VerifyResult{OK: err == nil, Seq: res.Seq, Digest: res.Digest, TreeRoot: res.TreeRoot, Difference: res.Difference}
	ev := a.log.Info()
	switch {
	case errors.Is(err, repair.ErrMismatch):
		out.Message = err.Error()
		ev = a.log.Error().Err(err)
	case err != nil:
		return out, fmt.Errorf("app: verify: %w", err)
	}
	ev.Str(logging.KeyComponent, "verify").Uint64(logging.KeySeq, out.Seq).Bool("ok", out.OK).Dur(logging.KeyTook, time.Since(start)).Msg("online verify")
	return out, nil
}
