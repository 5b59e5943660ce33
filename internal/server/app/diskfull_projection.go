package app

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/mewledger/ledger/internal/lib/logging"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/projections"
)

// pipelineFailed is the failure callback of the pipelines: a projector
// whose store could not write (a full disk: projections.ErrStoreFailed,
// ENOSPC) sets the storage problem and waits for the storage watch to
// reopen its store once space is back (runStorageWatch, with the embedded
// server and with an external one); any other failure
// stops the ledger (componentFailed).
func (a *App) pipelineFailed(name string, err error) {
	if name == "projector" && (errors.Is(err, projections.ErrStoreFailed) || errors.Is(err, syscall.ENOSPC)) {
		a.storage.mu.Lock()
		a.storage.projErr = err.Error()
		a.storage.mu.Unlock()
		a.log.Error().Err(err).Str(logging.KeyComponent, name).
			Msg("the projection cannot be written: appends are refused until space is freed, then it is reopened and folding resumes")
		return
	}
	a.componentFailed(name, err)
}

// projectorStorageFull is the projector's OnStorageFull: JetStream could
// not store its consumer (a full disk). With the embedded server it is the
// projection's storage problem like a failed commit (appends refused; the
// storage watch reopens the projection once space is back); the projector
// itself keeps trying either way.
func (a *App) projectorStorageFull(err error) {
	if a.srv == nil {
		return
	}
	a.storage.mu.Lock()
	first := a.storage.projErr == ""
	a.storage.projErr = "its JetStream consumer cannot be stored: " + err.Error()
	a.storage.mu.Unlock()
	if first {
		a.log.Error().Err(err).Str(logging.KeyComponent, "projector").
			Msg("the projector's consumer cannot be stored: appends are refused until space is freed, then folding resumes")
	}
}

// reopenProjection closes the projection whose commits failed and opens
// it again (Pebble replays its WAL: whole batches up to the checkpoint),
// then starts a new projector and expirer on it, which fold on from the
// checkpoint. Reads wait for the exchange. On failure to open, the old
// store stays (closed: reads answer projections.ErrClosed) and the watch
// tries again.
func (a *App) reopenProjection() error {
	old := a.current()
	old.stop()
	var opened *projections.Store
	err := a.api.SwapReader(func(prev httpapi.Reader) (httpapi.Reader, error) {
		if err := old.store.Close(); err != nil {
			a.log.Warn().Err(err).Msg("close the projection that failed")
		}
		s, err := a.openStore()
		if err != nil {
			return nil, err
		}
		opened = s
		return s, nil
	})
	if opened == nil {
		return fmt.Errorf("app: reopen the projection: %w", err)
	}
	p, err := a.newPipeline(opened)
	if err != nil {
		return fmt.Errorf("app: reopen the projection: %w", err)
	}
	p.start(context.Background(), a.pipelineFailed)
	a.setCurrent(p)
	a.log.Info().Uint64(logging.KeySeq, opened.AppliedSeq()).Msg("projection reopened; folding resumes")
	return nil
}
