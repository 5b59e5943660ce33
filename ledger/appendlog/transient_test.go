package appendlog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestIsTransient pins which publish errors are retried with the same
// Nats-Msg-Id and which are final.
func TestIsTransient(t *testing.T) {
	api := func(code jetstream.ErrorCode) error {
		return fmt.Errorf("%w: wrapped", &jetstream.APIError{Code: 409, ErrorCode: code, Description: "x"})
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"cancelled", context.Canceled, false},
		{"no responders", nats.ErrNoResponders, true},
		{"timeout", nats.ErrTimeout, true},
		{"deadline", context.DeadlineExceeded, true},
		{"reconnecting", nats.ErrConnectionReconnecting, true},
		{"cluster unavailable", api(10008), true},
		{"not leader", api(10009), true},
		{"msg id in process (cluster)", api(10158), true},
		{"wrong last sequence", api(10071), false},
		{"message too large", api(10054), false},
		{"other", errors.New("boom"), false},
	} {
		if got := appendlog.IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient = %v, want %v", c.name, got, c.want)
		}
	}
}
