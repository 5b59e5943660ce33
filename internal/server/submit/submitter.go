package submit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/subjects"
)

// ErrNoService is wrapped when no submit service answers on the subject.
var ErrNoService = errors.New("submit: no submit service")

// Submitter sends envelopes to the submit service over NATS.
type Submitter struct {
	nc      *nats.Conn
	timeout time.Duration
}

// DefaultSubmitTimeout bounds one request when ctx has no deadline.
const DefaultSubmitTimeout = 30 * time.Second

// DialSubmitter connects to NATS (url may be a comma-separated list),
// with opts added (credentials and the user's inbox prefix when the
// server requires authentication: internal/auth/authcfg). Close it when done.
func DialSubmitter(ctx context.Context, url string, opts ...nats.Option) (*Submitter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name("ledger publish"), nats.Timeout(5 * time.Second)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", client.ErrUnreachable, err)
	}
	return &Submitter{nc: nc, timeout: DefaultSubmitTimeout}, nil
}

// Submit sends one envelope to ledger.submit.<space> and returns the
// reply. A refusal is a result with Error set, not an error; the error is
// for transport failures (ErrNoService, timeouts).
func (s *Submitter) Submit(ctx context.Context, space string, envelope []byte) (api.AppendResult, error) {
	return s.submit(ctx, space, envelope, false)
}

// SubmitKernel sends one bare kernel submission (header Ledger-Kernel: 1):
// the service wraps it in its kernel/proposal envelope. A refusal's code
// is the V-PROP rule id.
func (s *Submitter) SubmitKernel(ctx context.Context, space string, bare []byte) (api.AppendResult, error) {
	return s.submit(ctx, space, bare, true)
}

func (s *Submitter) submit(ctx context.Context, space string, envelope []byte, kernel bool) (api.AppendResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	subj := subjects.Submit(space)
	req := nats.NewMsg(subj)
	req.Data = envelope
	if kernel {
		req.Header.Set(HeaderKernel, "1")
	}
	if space == "" {
		req.Header.Set(HeaderDefaultSpace, "1") // the service's default, by name
	}
	msg, err := s.nc.RequestMsgWithContext(ctx, req)
	if errors.Is(err, nats.ErrNoResponders) {
		return api.AppendResult{}, fmt.Errorf("%w on %s (is `ledger serve` running against this NATS?)", ErrNoService, subj)
	}
	if err != nil {
		return api.AppendResult{}, fmt.Errorf("submit: submit to %s: %w", subj, err)
	}
	return ParseReply(msg.Data)
}

// Close drains and closes the connection.
func (s *Submitter) Close() {
	if err := s.nc.Drain(); err != nil {
		s.nc.Close()
	}
}
