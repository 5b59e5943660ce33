package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/wire"
	"github.com/mewledger/ledger/internal/server/api"
)

// rawEvent reads the stored message at seq from the LEDGER stream for
// GET /v1/events/{seq}: a sequence the stream does not hold (beyond its
// end, or never stored) wraps api.ErrNoMessage.
func (a *App) rawEvent(ctx context.Context, seq uint64) (*api.RawMessage, error) {
	m, err := a.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: seq %d", api.ErrNoMessage, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("app: get message seq %d: %w", seq, err)
	}
	return &api.RawMessage{Subject: m.Subject, Header: m.Header, Data: m.Data, Time: m.Time}, nil
}

// consumers lists the LEDGER stream's consumers for GET /v1/status, by
// name.
func (a *App) consumers(ctx context.Context) ([]wire.Consumer, error) {
	var out []wire.Consumer
	l := a.stream.ListConsumers(ctx)
	for ci := range l.Info() {
		out = append(out, wire.Consumer{Name: ci.Name, Durable: ci.Config.Durable != "", Delivered: ci.Delivered.Stream,
			AckFloor: ci.AckFloor.Stream, Pending: ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered})
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("app: list consumers: %w", err)
	}
	slices.SortFunc(out, func(x, y wire.Consumer) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}
