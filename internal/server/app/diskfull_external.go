package app

import (
	"context"
	"fmt"
	"time"

	"github.com/mewledger/ledger/internal/lib/logging"
)

// runProjectionWatch is the storage watch with an external NATS server
// (--nats-url), until ctx ends. The log's disk is that server's: its
// full disk is its own refusal, answered to appends as the server words
// it, and a consumer it cannot store is retried by the projector. The
// projection's volume is the ledger's: a projection that cannot write
// (pipelineFailed) is a storage problem (appends refused storage_full,
// reads answered from what was folded) until that volume has room again
// (DiskResumeFree free and a probe file of that size allocated in the
// data directory), then the projection is reopened in-process and folds
// on from its checkpoint, as with the embedded server.
func (a *App) runProjectionWatch(ctx context.Context) {
	log := a.log.With().Str(logging.KeyComponent, "storage").Logger()
	dir := a.opts.ProjectionDir()
	t := time.NewTicker(a.opts.DiskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.storage.mu.Lock()
		projErr, down := a.storage.projErr, a.storage.problem != ""
		a.storage.mu.Unlock()
		if projErr == "" && !down {
			continue
		}
		free, err := freeBytes(dir)
		if err != nil {
			continue
		}
		if free >= a.disk.resume {
			err = probeSpace(a.opts.DataDir, a.disk.resume)
			if err == nil && projErr != "" {
				err = a.reopenProjection()
			}
			if err == nil {
				a.storage.mu.Lock()
				a.storage.projErr = ""
				a.storage.mu.Unlock()
				a.setStorageProblem("")
				log.Info().Uint64("free_bytes", free).Msg("space is back for the projection: appends accepted")
				continue
			}
			if time.Since(a.storage.retried) > time.Minute {
				log.Warn().Err(err).Uint64("free_bytes", free).Msg("space is back but the projection cannot write yet; retrying")
			}
			a.storage.retried = time.Now()
		}
		p := fmt.Sprintf("the projection in %s cannot be written (%d bytes free; %s); nothing is appended until space is freed, then the ledger resumes by itself", dir, free, projErr)
		if a.setStorageProblem(p) {
			log.Error().Str(logging.KeyDataDir, dir).Uint64("free_bytes", free).
				Msg("the projection's disk is full: appends are refused and the ledger is not ready until space is freed")
		}
	}
}
