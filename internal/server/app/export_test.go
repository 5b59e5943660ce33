package app

import (
	"context"
	"time"
)

// RestartJetStream restarts the embedded server's JetStream as the
// storage watch does once space is back (after waiting for the watch to
// take the configuration to restart with).
func (a *App) RestartJetStream(ctx context.Context) error {
	for {
		a.storage.mu.Lock()
		ok := a.storage.jsCfg != nil
		a.storage.mu.Unlock()
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return a.restartJetStream(ctx, a.srv.NatsServer())
}
