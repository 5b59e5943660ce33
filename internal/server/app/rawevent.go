package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	httpapi "github.com/mewledger/ledger/internal/server/api"
)

// rawEvent reads the stored message at seq from the LEDGER stream for
// GET /v1/events/{seq}: a sequence the stream does not hold (beyond its
// end, or never stored) wraps httpapi.ErrNoMessage.
func (a *App) rawEvent(ctx context.Context, seq uint64) (*httpapi.RawMessage, error) {
	m, err := a.stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: seq %d", httpapi.ErrNoMessage, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("app: get message seq %d: %w", seq, err)
	}
	return &httpapi.RawMessage{Subject: m.Subject, Header: m.Header, Data: m.Data, Time: m.Time}, nil
}

// consumers lists the LEDGER stream's consumers for GET /v1/status, by
// name.
func (a *App) consumers(ctx context.Context) ([]api.Consumer, error) {
	var out []api.Consumer
	l := a.stream.ListConsumers(ctx)
	for ci := range l.Info() {
		out = append(out, api.Consumer{Name: ci.Name, Durable: ci.Config.Durable != "", Delivered: ci.Delivered.Stream,
			AckFloor: ci.AckFloor.Stream, Pending: ci.NumPending, AckPending: ci.NumAckPending, Redelivered: ci.NumRedelivered})
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("app: list consumers: %w", err)
	}
	slices.SortFunc(out, func(x, y api.Consumer) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}
