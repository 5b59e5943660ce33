package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	pub "github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/projections/model"
)

// WatchOptions are the filters of GET /v1/watch.
type WatchOptions struct {
	Space, Proposal, State string
	// SinceSeq, when set, starts after that sequence; nil starts at the
	// projection's checkpoint (changes from now on).
	SinceSeq *uint64
	// Retry is the pause before reconnecting after the stream ends.
	// Default 2s.
	Retry time.Duration
}

// Watch streams the changes of GET /v1/watch to fn, with each change's raw
// JSON: the public client's WatchFunc (reconnecting with Last-Event-ID, so
// nothing is missed), with this package's errors: an error answer of the
// API is an *APIError, no ledger at the first connection ErrUnreachable.
func (c *Client) Watch(ctx context.Context, o WatchOptions, fn func(ch model.Change, raw []byte) error) error {
	pc, err := pub.New(pub.Options{API: c.opts.API, Token: c.opts.Token, HTTP: c.opts.HTTP})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
	}
	po := pub.WatchOptions{Space: o.Space, Proposal: o.Proposal, State: o.State, Retry: o.Retry}
	if o.SinceSeq != nil {
		po.SinceSeq, po.FromStart = *o.SinceSeq, true
	}
	err = pc.WatchFunc(ctx, po, fn)
	var le *pub.Error
	switch {
	case errors.As(err, &le):
		return &APIError{Status: le.Status, Code: le.Code, Message: le.Message, Field: le.Field}
	case errors.Is(err, pub.ErrUnreachable):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}
