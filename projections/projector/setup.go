package projector

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/projections"
)

// setupError is a failure to start a session (find the stream, position
// the durable consumer, start pulling), before anything was folded.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// Retry bounds of a session that could not be set up for a transient
// reason: the first wait, and the longest.
const (
	setupRetryFirst = 100 * time.Millisecond
	setupRetryMax   = 2 * time.Second
)

// transientSetup reports whether err is a session setup failure that the
// JetStream cluster's state explains and that goes away on its own: an API
// request that timed out or found no responder (a leader election, a node
// shutting down or restarting, a loaded machine), or a 503 (JetStream or
// the cluster temporarily unavailable). A gap between the checkpoint and
// the stream, or anything else, is not: Run returns it.
func transientSetup(err error) bool {
	var se *setupError
	if !errors.As(err, &se) || errors.Is(err, projections.ErrGap) {
		return false
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503
	}
	return false
}

// JetStream error codes of a consumer that could not be stored
// (nats-server's JSConsumerCreateErrF carrying "error creating store for
// consumer", JSStorageResourcesExceededErr, JSInsufficientResourcesErr).
const (
	errCodeConsumerCreate    = 10012
	errCodeInsufficientRes   = 10023
	errCodeStorageExceeded   = 10047
	consumerStoreFailedMatch = "creating store for consumer"
)

// storageSetup reports whether err is a session setup that JetStream
// refused for want of storage: the consumer's state could not be written
// (its disk is full). It goes away once space is freed.
func storageSetup(err error) bool {
	var se *setupError
	var apiErr *jetstream.APIError
	if !errors.As(err, &se) || !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errCodeStorageExceeded, errCodeInsufficientRes:
		return true
	case errCodeConsumerCreate:
		return strings.Contains(apiErr.Description, consumerStoreFailedMatch)
	}
	return false
}

// waitSetupRetry waits d (doubled for the next time, up to setupRetryMax)
// or until ctx ends, and reports whether to try again.
func waitSetupRetry(ctx context.Context, d *time.Duration) bool {
	t := time.NewTimer(*d)
	defer t.Stop()
	*d = min(2**d, setupRetryMax)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// streamGone reports whether err is a session setup that found no stream
// (see Options.WaitForStream).
func streamGone(err error) bool {
	var se *setupError
	return errors.As(err, &se) && errors.Is(err, jetstream.ErrStreamNotFound)
}
