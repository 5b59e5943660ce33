package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// DefaultSyncInterval is nats-server's own default fsync interval, which
// the append figure runs with (the ledger's default is always).
const DefaultSyncInterval = 2 * time.Minute

// env is an embedded server in a temporary directory with the LEDGER
// stream, and an in-process connection to it (as package app connects).
type env struct {
	dir    string
	srv    *natsserver.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
}

// startEnv starts a fresh server in a new directory under tmp: fsync on
// every write when syncAlways, else every DefaultSyncInterval.
func startEnv(ctx context.Context, tmp string, syncAlways bool, log zerolog.Logger) (e *env, err error) {
	e = &env{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.dir, err = os.MkdirTemp(tmp, "ledger-bench-nats-*"); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	so := natsserver.Options{StoreDir: e.dir, Port: natsserver.RandomPort, Logger: log}
	if syncAlways {
		so.SyncAlways = true
	} else {
		so.SyncInterval = DefaultSyncInterval
	}
	if e.srv, err = natsserver.Start(ctx, so); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.nc, err = nats.Connect("", nats.InProcessServer(e.srv.NatsServer()), nats.Name("ledger bench")); err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	if e.js, err = jetstream.New(e.nc); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if e.stream, err = appendlog.EnsureStream(ctx, e.js, appendlog.StreamOptions{}); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return e, nil
}

// lastSeq returns the stream's last sequence and message count.
func (e *env) state(ctx context.Context) (last, msgs uint64, err error) {
	info, err := e.stream.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: stream info: %w", err)
	}
	return info.State.LastSeq, info.State.Msgs, nil
}

// close stops everything and removes the directory.
func (e *env) close() {
	if e.nc != nil {
		e.nc.Close()
	}
	if e.srv != nil {
		e.srv.Shutdown()
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// publishRaw publishes evs with jetstream.PublishAsync, each with its
// Nats-Msg-Id, at most window unacknowledged, and waits for every ack. It
// is the raw baseline of the append figures, and how the fold figure fills
// its stream.
func publishRaw(ctx context.Context, nc *nats.Conn, evs []event, window int) error {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer js.CleanupPublisher()
	// A full window waits for a slot (not nats.go's default 200ms, after
	// which it gives up): under load an fsync can take longer.
	stall := jetstream.WithStallWait(time.Minute)
	futs := make([]jetstream.PubAckFuture, len(evs))
	for i, ev := range evs {
		if futs[i], err = js.PublishAsync(ev.subject, ev.raw, jetstream.WithMsgID(ev.msgID), stall); err != nil {
			return fmt.Errorf("bench: publish %d: %w", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				return fmt.Errorf("bench: publish %d: stored as a duplicate", i)
			}
		case err := <-f.Err():
			return fmt.Errorf("bench: publish %d: %w", i, err)
		default:
			return errors.New("bench: publish: an ack is missing after PublishAsyncComplete")
		}
	}
	return nil
}
