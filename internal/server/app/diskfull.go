package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mewledger/ledger/internal/lib/logging"
)

// A full disk is a state, not a hang (contract §10, issues 29 and 36).
//
// When the embedded server's JetStream cannot write its store (no space
// left on the device), nats-server keeps the stream's write error: every
// later append waits for an acknowledgement that never comes, even once
// space is back, until the process restarts. The storage watch (run by
// Run, for the embedded server) looks at the store's file system every
// DiskCheckInterval; when less than DiskLowFree bytes are free (by
// default what the ledger needs to make progress: diskbudget.go), when
// the server has logged a store write error (natsserver.Options.
// OnStoreError: a quota or a memory limit can refuse writes while the
// file system shows free space), when the projection could not write
// (projectionFailed), or when JetStream is off:
//
//   - it sets the storage problem: appends on every path (HTTP, NDJSON,
//     the submit service, gaps) are answered at once 503 / storage_full
//     with it, appends waiting for an acknowledgement are answered so too
//     (not acknowledged: retrying is safe), and /readyz is 503 naming the
//     store directory and its free space; reads keep answering;
//   - once DiskResumeFree bytes are free again and a probe file of that
//     size can be allocated, it reopens a projection that failed (its
//     projector resumes from its checkpoint: the batch that failed was
//     not committed), restarts JetStream in the process when it failed
//     (each account's JetStream disabled and enabled again with its
//     limits: the store is recovered from disk as after a crash, and the
//     write error is gone; nothing acknowledged was lost, since an append is acknowledged
//     only once stored), waits for the stream to answer, and clears the
//     problem. Each transition is logged.
//
// With --nats-url the servers are someone else's: their disks are theirs
// to watch, and appends fail as the client's timeouts say; a projection
// that cannot write stops the ledger.

// Defaults of the storage watch.
const (
	DefaultDiskCheckInterval = 250 * time.Millisecond
)

type storageState struct {
	mu       sync.Mutex
	problem  string
	writeErr string                  // the server's last store write error, until JetStream restarts
	projErr  string                  // the projection's write failure, until it is reopened
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
	a.storage.mu.Lock()
	defer a.storage.mu.Unlock()
	a.storage.writeErr = msg
}

// runStorageWatch watches the ledger's storage until ctx ends.
//
// With the embedded server it watches the JetStream store's volume (free
// space, the server's store write errors, JetStream turned off) and the
// projection's failures, and restarts JetStream and reopens the
// projection once space is back. With an external NATS server (--nats-url)
// the log's disk is that server's (its full disk is its own refusal,
// answered to appends as the server words it; a consumer it cannot store
// is retried by the projector): the watch then only takes a projection
// that cannot write (pipelineFailed) as a storage problem until the
// projection's volume has room (DiskResumeFree free and a probe file of
// that size allocated in the data directory), then reopens it in-process.
func (a *App) runStorageWatch(ctx context.Context) {
	var ns *server.Server
	dir, probeDir := a.opts.ProjectionDir(), a.opts.DataDir
	if a.srv != nil {
		ns = a.srv.NatsServer()
		dir, probeDir = a.opts.NATSDir(), a.opts.NATSDir()
		if cfg := ns.JetStreamConfig(); cfg != nil {
			c := *cfg
			// EnableJetStream appends "jetstream" to the directory it is given.
			if filepath.Base(c.StoreDir) == server.JetStreamStoreDir {
				c.StoreDir = filepath.Dir(c.StoreDir)
			}
			a.storage.mu.Lock()
			a.storage.jsCfg = &c
			a.storage.mu.Unlock()
		}
	}
	log := a.log.With().Str(logging.KeyComponent, "storage").Logger()
	t := time.NewTicker(a.opts.DiskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.storage.mu.Lock()
		down, writeErr, projErr := a.storage.problem != "", a.storage.writeErr, a.storage.projErr
		a.storage.mu.Unlock()
		if ns == nil && projErr == "" && !down {
			continue // external NATS: only the projection's failure is ours
		}
		free, err := freeBytes(dir)
		if err != nil {
			continue
		}
		jsOff := ns != nil && !ns.JetStreamEnabled()
		switch {
		case down && free >= a.disk.resume:
			// Space is back.
			// What the ledger needs must really fit (a quota or a memory
			// limit can refuse it while statfs shows free space).
			err := probeSpace(probeDir, a.disk.resume)
			if err == nil && projErr != "" {
				err = a.reopenProjection()
			}
			if err == nil && ns != nil && (writeErr != "" || jsOff) {
				err = a.restartJetStream(ctx, ns)
			}
			if err != nil {
				if time.Since(a.storage.retried) > time.Minute {
					log.Warn().Err(err).Uint64("free_bytes", free).Msg("space is back but the ledger cannot write yet; retrying")
				}
				a.storage.retried = time.Now()
				continue
			}
			a.storage.mu.Lock()
			a.storage.writeErr, a.storage.projErr = "", ""
			a.storage.mu.Unlock()
			a.setStorageProblem("")
			log.Info().Uint64("free_bytes", free).Msg("space is back: appends accepted")
		case projErr != "" || (ns != nil && (free < a.disk.low || writeErr != "" || jsOff)):
			// Full (the reason is updated while it lasts).
			p := fmt.Sprintf("the disk of the log is full: %d bytes free in %s (the JetStream store; the ledger needs %d); nothing is appended until space is freed, then the ledger resumes by itself", free, dir, a.disk.low)
			switch {
			case projErr != "":
				p = fmt.Sprintf("the projection in %s cannot be written (%d bytes free; %s); nothing is appended until space is freed, then the ledger resumes by itself", a.opts.ProjectionDir(), free, projErr)
			case writeErr != "":
				p = fmt.Sprintf("the JetStream store in %s cannot be written (%d bytes free; the server said: %s); nothing is appended until space is freed, then the ledger resumes by itself", dir, free, writeErr)
			}
			if a.setStorageProblem(p) {
				log.Error().Str(logging.KeyDataDir, dir).Uint64("free_bytes", free).
					Msg("the disk of the log is full: appends are refused and the ledger is not ready until space is freed")
			}
		}
	}
}

// restartJetStream clears a stream's write error (nats-server keeps it
// until the stream's store is reopened) and waits for the LEDGER stream to
// answer.
//
// While the server's JetStream is on, it is restarted account by account
// (Account.DisableJetStream, then EnableJetStream with the limits the
// account had): every stream of the account is stopped and recovered from
// its store, as after a crash. The server-wide ShutdownJetStream and
// EnableJetStream are not used for this: ShutdownJetStream leaves the
// JetStream API subscription of the old instance in place, so requests
// from clients keep being dispatched to it while EnableJetStream sets up
// the new one. EnableJetStream then writes the server's API request queues
// (setJetStreamExportSubs) while that old dispatcher reads them (a data
// race in nats-server v2.15: any JetStream API request, such as the
// projector's consumer being set up again, met it), and every JetStream
// API request is dispatched twice from then on. Only when the server
// turned JetStream off by itself (a permission error on its store) is
// JetStream enabled again server-wide: there is no other way back.
func (a *App) restartJetStream(ctx context.Context, ns *server.Server) error {
	a.storage.mu.Lock()
	jsCfg := a.storage.jsCfg
	a.storage.mu.Unlock()
	if jsCfg == nil {
		return fmt.Errorf("app: no JetStream configuration to restart with")
	}
	if ns.JetStreamEnabled() {
		if err := restartJetStreamAccounts(ns, filepath.Join(jsCfg.StoreDir, server.JetStreamStoreDir)); err != nil {
			return err
		}
	} else {
		cfg := *jsCfg
		if err := ns.EnableJetStream(&cfg); err != nil {
			return fmt.Errorf("app: enable JetStream: %w", err)
		}
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := a.stream.Info(ictx); err == nil {
			return nil
		} else if ictx.Err() != nil {
			return fmt.Errorf("app: the LEDGER stream does not answer after JetStream restarted: %w", err)
		}
		select {
		case <-ictx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// restartJetStreamAccounts disables and enables again JetStream in every
// account that has a directory in the JetStream store dir, with the
// limits it had.
func restartJetStreamAccounts(ns *server.Server, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("app: read the JetStream store %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		acc, err := ns.LookupAccount(e.Name())
		if err != nil || !acc.JetStreamEnabled() {
			continue // not an account (the server's own directories), or no JetStream there
		}
		limits := jetStreamLimits(acc.JetStreamUsage())
		if err := acc.DisableJetStream(); err != nil {
			return fmt.Errorf("app: disable JetStream in account %s: %w", e.Name(), err)
		}
		if err := acc.EnableJetStream(limits, nil); err != nil {
			return fmt.Errorf("app: enable JetStream in account %s: %w", e.Name(), err)
		}
	}
	return nil
}

// jetStreamLimits returns the limits an account's usage reports, by tier.
func jetStreamLimits(st server.JetStreamAccountStats) map[string]server.JetStreamAccountLimits {
	if len(st.Tiers) == 0 {
		return map[string]server.JetStreamAccountLimits{"": st.Limits}
	}
	limits := make(map[string]server.JetStreamAccountLimits, len(st.Tiers))
	for t, tier := range st.Tiers {
		limits[t] = tier.Limits
	}
	return limits
}
