package projector

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/projections"
)

// TestTransientSetup: session setup failures that a cluster's state
// explains are retried; a gap, a missing stream, or a failure outside
// setup are not.
func TestTransientSetup(t *testing.T) {
	setup := func(err error) error {
		return &setupError{fmt.Errorf("projector: delete consumer projector-a: %w", err)}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"API timeout", setup(context.DeadlineExceeded), true},
		{"nats timeout", setup(nats.ErrTimeout), true},
		{"no responders", setup(nats.ErrNoResponders), true},
		{"503", setup(&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), true},
		{"gap", setup(fmt.Errorf("%w: projection is at seq 3 but stream LEDGER starts at seq 9", projections.ErrGap)), false},
		{"stream not found", setup(jetstream.ErrStreamNotFound), false},
		{"timeout outside setup", fmt.Errorf("projector: fold: %w", context.DeadlineExceeded), false},
		{"nil", nil, false},
	} {
		if got := transientSetup(tc.err); got != tc.want {
			t.Errorf("%s: transientSetup(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestWaitSetupRetry: the wait doubles up to its bound and ends with ctx.
func TestWaitSetupRetry(t *testing.T) {
	d := setupRetryFirst
	if !waitSetupRetry(context.Background(), &d) || d != 2*setupRetryFirst {
		t.Fatalf("after one wait: next %v, want %v", d, 2*setupRetryFirst)
	}
	d = setupRetryMax
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waitSetupRetry(ctx, &d) || d != setupRetryMax {
		t.Fatalf("cancelled: retried or next %v (want %v)", d, setupRetryMax)
	}
}

// TestStorageSetup: a consumer JetStream could not store (a full disk)
// is told apart from other consumer-create failures.
func TestStorageSetup(t *testing.T) {
	setup := func(err error) error {
		return &setupError{fmt.Errorf("projector: create consumer projector at seq 1: %w", err)}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"store for consumer", setup(&jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "error creating store for consumer"}), true},
		{"storage exceeded", setup(&jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}), true},
		{"insufficient resources", setup(&jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"}), true},
		{"other create error", setup(&jetstream.APIError{Code: 500, ErrorCode: 10012, Description: "consumer name is too long"}), false},
		{"outside setup", fmt.Errorf("projector: fold: %w", &jetstream.APIError{Code: 500, ErrorCode: 10047}), false},
		{"nil", nil, false},
	} {
		if got := storageSetup(tc.err); got != tc.want {
			t.Errorf("%s: storageSetup(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
