package app

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mewledger/ledger/internal/lib/logging"
)

// A full disk is a state, not a hang (contract §10, issue 29 item 5).
//
// When the embedded server's JetStream cannot write its store (no space
// left on the device), nats-server keeps the stream's write error: every
// later append waits for an acknowledgement that never comes, even once
// space is back, until the process restarts. The storage watch (run by
// Run, for the embedded server) looks at the store's file system every
// DiskCheckInterval; when less than DiskLowFree bytes are free, when the
// server has logged a store write error (natsserver.Options.OnStoreError:
// a quota or a memory limit can refuse writes while the file system shows
// free space), or when JetStream is off:
//
//   - it sets the storage problem: appends on every path (HTTP, NDJSON,
//     the submit service, gaps) are answered at once 503 / storage_full
//     with it, appends waiting for an acknowledgement are answered so too
//     (not acknowledged: retrying is safe), and /readyz is 503 naming the
//     store directory and its free space;
//   - once DiskResumeFree bytes are free again (and, after a write error,
//     DiskLowFree more than when it happened), it restarts JetStream in
//     the process (shut down, enabled again with the configuration it had:
//     the store is recovered from disk as after a crash, and the write
//     error is gone; nothing acknowledged was lost, since an append is
//     acknowledged only once stored), waits for the stream to answer, and
//     clears the problem. Each transition is logged.
//
// With --nats-url the servers are someone else's: their disks are theirs
// to watch, and appends fail as the client's timeouts say.
//
// Pebble (the projection) shares the data directory: it writes only what
// JetStream stored, so it rarely meets the full disk first; when it does,
// the projector fails and the ledger stops (see docs/security.md).

// Defaults of the storage watch.
const (
	DefaultDiskCheckInterval = 250 * time.Millisecond
	DefaultDiskLowFree       = 4 << 20
	DefaultDiskResumeFree    = 16 << 20
)

type storageState struct {
	mu       sync.Mutex
	problem  string
	writeErr string                  // the server's last store write error, until JetStream restarts
	freeAt   uint64                  // free bytes when it happened
	down     chan struct{}           // closed while problem is set
	jsCfg    *server.JetStreamConfig // the configuration to enable JetStream with again
	retried  time.Time               // last failed attempt to enable it, logged once
}

// StorageProblem returns why the ledger cannot write now, or "".
func (a *App) StorageProblem() string {
	a.storage.mu.Lock()
	defer a.storage.mu.Unlock()
	return a.storage.problem
}

// StorageDown returns a channel closed while (or once) the ledger cannot
// write.
func (a *App) StorageDown() <-chan struct{} {
	a.storage.mu.Lock()
	defer a.storage.mu.Unlock()
	if a.storage.down == nil {
		a.storage.down = make(chan struct{})
	}
	return a.storage.down
}

// setStorageProblem sets (p != "") or clears the problem and reports
// whether it was clear before.
func (a *App) setStorageProblem(p string) (wasClear bool) {
	a.storage.mu.Lock()
	defer a.storage.mu.Unlock()
	wasClear = a.storage.problem == ""
	if a.storage.down == nil {
		a.storage.down = make(chan struct{})
	}
	switch {
	case p != "" && wasClear:
		close(a.storage.down)
	case p == "" && !wasClear:
		a.storage.down = make(chan struct{})
	}
	a.storage.problem = p
	return wasClear
}

// freeBytes returns the bytes available to this process on dir's file
// system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// storeWriteFailed is the embedded server's OnStoreError: the store could
// not be written (its file system may still show free space: a quota, a
// memory limit on a tmpfs). The watch takes it as a full disk.
func (a *App) storeWriteFailed(msg string) {
	free, _ := freeBytes(a.opts.NATSDir())
	a.storage.mu.Lock()
	defer a.storage.mu.Unlock()
	if a.storage.writeErr == "" {
		a.storage.freeAt = free
	}
	a.storage.writeErr = msg
}

// runStorageWatch watches the embedded server's store until ctx ends.
func (a *App) runStorageWatch(ctx context.Context) {
	ns := a.srv.NatsServer()
	if cfg := ns.JetStreamConfig(); cfg != nil {
		c := *cfg
		// EnableJetStream appends "jetstream" to the directory it is given.
		if filepath.Base(c.StoreDir) == server.JetStreamStoreDir {
			c.StoreDir = filepath.Dir(c.StoreDir)
		}
		a.storage.jsCfg = &c
	}
	log := a.log.With().Str(logging.KeyComponent, "storage").Logger()
	dir := a.opts.NATSDir()
	t := time.NewTicker(a.opts.DiskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		free, err := freeBytes(dir)
		if err != nil {
			continue
		}
		a.storage.mu.Lock()
		down, writeErr, freeAt := a.storage.problem != "", a.storage.writeErr, a.storage.freeAt
		a.storage.mu.Unlock()
		// After a write error, space is back when it has grown by
		// DiskLowFree since (the file system may have shown some free
		// space all along).
		resume := uint64(a.opts.DiskResumeFree)
		if writeErr != "" {
			resume = max(resume, freeAt+uint64(a.opts.DiskLowFree))
		}
		switch {
		case !down && (free < uint64(a.opts.DiskLowFree) || writeErr != "" || !ns.JetStreamEnabled()):
			p := fmt.Sprintf("the disk of the log is full: %d bytes free in %s (the JetStream store); nothing is appended until space is freed, then the ledger resumes by itself", free, dir)
			if writeErr != "" {
				p = fmt.Sprintf("the JetStream store in %s cannot be written (%d bytes free; the server said: %s); nothing is appended until space is freed, then the ledger resumes by itself", dir, free, writeErr)
			}
			if a.setStorageProblem(p) {
				log.Error().Str(logging.KeyDataDir, dir).Uint64("free_bytes", free).
					Msg("the disk of the log is full: appends are refused and the ledger is not ready until space is freed")
			}
		case down && free >= resume:
			if err := a.restartJetStream(ctx, ns); err != nil {
				if time.Since(a.storage.retried) > time.Minute {
					log.Warn().Err(err).Uint64("free_bytes", free).Msg("space is back but JetStream does not restart yet; retrying")
				}
				a.storage.retried = time.Now()
				continue
			}
			a.storage.mu.Lock()
			a.storage.writeErr = ""
			a.storage.mu.Unlock()
			a.setStorageProblem("")
			log.Info().Uint64("free_bytes", free).Msg("space is back: JetStream restarted from its store; appends accepted")
		}
	}
}

// restartJetStream shuts the embedded server's JetStream down (clearing a
// stream's write error) and enables it again from its store, then waits
// for the LEDGER stream to answer.
func (a *App) restartJetStream(ctx context.Context, ns *server.Server) error {
	if a.storage.jsCfg == nil {
		return fmt.Errorf("app: no JetStream configuration to restart with")
	}
	if ns.JetStreamEnabled() {
		if err := ns.ShutdownJetStream(); err != nil {
			return fmt.Errorf("app: shut JetStream down: %w", err)
		}
	}
	cfg := *a.storage.jsCfg
	if err := ns.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("app: enable JetStream: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if _, err := a.stream.Info(ictx); err == nil {
			return nil
		} else if ictx.Err() != nil {
			return fmt.Errorf("app: the LEDGER stream does not answer after JetStream restarted: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
