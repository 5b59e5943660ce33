package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/api"
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
