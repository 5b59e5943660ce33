package appendlog

import (
	"context"
	"fmt"

	"github.com/mewledger/ledger/ledger"
)

// PrepareBody is the one validation of every submit path (HTTP, the
// submit service, the CLI through HTTP, the bridge):
// ledger.PrepareBodyStandalone with the Appender's default space, limits
// and clock. It takes a body as a client sent it and returns it ready to
// publish, in this order:
//
//  1. the sender check of o.Sender (when set);
//  2. dialect detection: a bare kernel submission (o.Kernel, or
//     MaybeBareKernel) is validated (ValidateKernel; refusal codes are the
//     V-PROP rule ids, fields relative to the bare object) and wrapped in
//     its kernel/proposal envelope (WrapKernel), the Appender's clock
//     being V-PROP-010's "now";
//  3. Prepare's checks (space, size, Decode, Submittable, limits) on the
//     envelope, which is decoded once: a wrapped envelope's decoded form
//     from step 2 is reused, and its kernel payload is not validated
//     again.
//
// space "" is the Appender's default space. The error is a *RefusalError.
// body is not copied (a wrapped envelope is a new slice).
func (a *Appender) PrepareBody(space string, body []byte, o ledger.BodyOptions) (*ledger.Prepared, error) {
	if space == "" {
		space = a.opts.Space
	}
	return ledger.PrepareBodyStandalone(space, body, o, a.opts.Limits, a.opts.Now())
}

// SubmitBody is PrepareBody, then Submit: it hands the envelope to the
// group commit and returns its Pending without waiting for the
// acknowledgement (unless the commit queue is full, when it waits for
// room or ctx). The error is PrepareBody's refusal, or wraps ErrPublish
// (and ctx's error or ErrClosed) and names the envelope id. It is what the
// streaming paths (NDJSON, the submit service) call for each envelope.
func (a *Appender) SubmitBody(ctx context.Context, space string, body []byte, o ledger.BodyOptions) (*Pending, error) {
	p, err := a.PrepareBody(space, body, o)
	if err != nil {
		return nil, err
	}
	pd, err := a.Submit(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, err)
	}
	return pd, nil
}

// AppendBody is SubmitBody, then waits for the acknowledgement: Append for
// a body in any form a submit path takes. The returned error is
// Result.Err.
func (a *Appender) AppendBody(ctx context.Context, space string, body []byte, o ledger.BodyOptions) (ledger.Result, error) {
	pd, err := a.SubmitBody(ctx, space, body, o)
	if err != nil {
		return ledger.Result{Err: err}, err
	}
	return pd.Result(ctx)
}
