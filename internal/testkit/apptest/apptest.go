// Package apptest runs a whole ledger (package app) in-process for tests:
// a real embedded NATS server with JetStream and a real Pebble store under
// t.TempDir(), the HTTP API on a free loopback port. Nothing is mocked.
package apptest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// Options returns the test defaults: a fresh data directory, free ports,
// the test logger, a short min_seq wait (1s) so "not caught up" tests are
// quick, and fsync on every write (the product default).
func Options(t testing.TB) app.Options {
	return app.Options{
		DataDir:    t.TempDir(),
		HTTPAddr:   "127.0.0.1:0",
		NATSListen: "127.0.0.1:-1",
		MinSeqWait: time.Second,
		Logger:     natstest.Logger(t),
	}
}

// Start runs a ledger with Options(t), changed by each edit, and returns it
// once it serves (the submit service is registered, the projector runs).
// t.Cleanup closes it and fails the test if Run returned an error.
func Start(t testing.TB, edits ...func(*app.Options)) *app.App {
	t.Helper()
	o := Options(t)
	for _, e := range edits {
		e(&o)
	}
	return StartWith(t, o)
}

// StartWith runs a ledger with o.
func StartWith(t testing.TB, o app.Options) *app.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.New(ctx, o)
	if err != nil {
		t.Fatalf("apptest: new: %v", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(context.Background()) }()
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("apptest: close: %v", err)
		}
		if err := <-runErr; err != nil && !errors.Is(err, app.ErrClosed) {
			t.Errorf("apptest: run: %v", err)
		}
	})
	select {
	case <-a.Ready():
	case err := <-runErr:
		runErr <- err
		t.Fatalf("apptest: run ended before serving: %v", err)
	case <-ctx.Done():
		t.Fatalf("apptest: not serving after 60s")
	}
	return a
}
