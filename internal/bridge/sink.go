package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// Sink is where a bridge sends what it records: one of the ledger's
// normal append paths (the HTTP API, the submit service, or the
// Appender of the ledger process it runs in).
//
// Both methods return the ledger's answer: a result with Error set is a
// refusal (the ledger said no; retrying changes nothing); an error means
// no answer (unreachable, not acknowledged, shutting down) and the call
// may be repeated: it is idempotent (the stream dedups by Nats-Msg-Id,
// gap ids are deterministic).
type Sink interface {
	// Append appends one envelope to a ledger space. With sender "" it is
	// published under the envelope's from, as every client's is; with a
	// sender, under that sender's subject token (history mode, contract §14),
	// so that a from that differs is folded invalid (spoofed_sender). A
	// sink that cannot publish under another sender returns
	// ErrSenderUnsupported.
	Append(ctx context.Context, space string, raw []byte, sender string) (api.AppendResult, error)
	// AppendBatch appends envelopes in order, handing them to the
	// ledger's group commit together (one request), and returns one
	// result per envelope, in order. An error means the batch as a whole
	// got no answer (some envelopes may be stored: repeating it is safe).
	AppendBatch(ctx context.Context, space string, batch []Envelope) ([]api.AppendResult, error)
	// Gap asks the ledger to record a gap (ledger/gap, written by the
	// ledger itself with sender "ledger").
	Gap(ctx context.Context, space string, g ledger.Gap) (api.AppendResult, error)
	// SessionReader reads what the ledger knows of the bridge's sessions
	// (ErrNoSessions when the sink cannot).
	SessionReader
}

// Envelope is one envelope of a batch: its bytes as received, the sender
// to publish it under ("" : its from; see Sink.Append), and the bridge's
// session mark (a ledger.BridgeMark, header Ledger-Bridge; one per batch
// on the HTTP and NATS paths: the first envelope's).
type Envelope struct {
	Raw    []byte
	Sender string
	Mark   string
}

// Errors of sinks.
var (
	// ErrSenderUnsupported: the sink publishes only under the envelope's
	// from (the HTTP API); history mode needs NATS or the in-process sink.
	ErrSenderUnsupported = errors.New("bridge: this append path cannot publish under a given sender (history mode needs --nats-url or ledger serve --bridge-mew-config)")
)

// CodeReservedSender is the refusal code of an envelope whose real sender
// (the history file's received participant) is the ledger's own sender.
const CodeReservedSender = api.CodeReservedSender

// AppenderSink appends through the Appender of the ledger process the
// bridge runs in (ledger serve --bridge-mew-config): the same validation,
// dedup and group commit as every submit path.
type AppenderSink struct {
	Appender *appendlog.Appender
	// Sessions reads the ledger's bridge sessions (in `ledger serve`: its
	// own projection, caught up); nil: the bridge cannot learn how its
	// last session ended.
	Sessions SessionReader
}

// Append implements Sink.
func (s AppenderSink) Append(ctx context.Context, space string, raw []byte, sender string) (api.AppendResult, error) {
	return appenderResult(AppendAs(ctx, s.Appender, space, raw, sender))
}

// AppendBatch implements Sink: every envelope is handed to the group
// commit before any is awaited, so that a batch is stored in a few atomic
// commits.
func (s AppenderSink) AppendBatch(ctx context.Context, space string, batch []Envelope) ([]api.AppendResult, error) {
	return appenderBatch(ctx, s.Appender, space, batch)
}

// appenderBatch submits a batch to an Appender and awaits it: a refusal
// is a result with Error; a publish failure of any envelope fails the
// batch (it is repeated whole; the stream dedups what was stored).
func appenderBatch(ctx context.Context, a *appendlog.Appender, space string, batch []Envelope) ([]api.AppendResult, error) {
	out := make([]api.AppendResult, len(batch))
	pending := make([]*appendlog.Pending, len(batch))
	for i, e := range batch {
		pd, err := a.SubmitBody(ctx, space, e.Raw, ledger.BodyOptions{Sender: e.Sender, Bridge: e.Mark})
		if err != nil {
			if _, refused := ledger.AsRefusal(err); refused {
				out[i] = ledger.WireResult(ledger.Result{Err: err})
				continue
			}
			return nil, err
		}
		pending[i] = pd
	}
	var failed error
	for i, pd := range pending {
		if pd == nil {
			continue
		}
		r, err := appenderResult(pd.Result(ctx))
		if err != nil && failed == nil {
			failed = err
		}
		out[i] = r
	}
	if failed != nil {
		return nil, failed
	}
	return out, nil
}

// Gap implements Sink.
func (s AppenderSink) Gap(ctx context.Context, space string, g ledger.Gap) (api.AppendResult, error) {
	raw, err := ledger.GapEnvelope(g)
	if err != nil {
		return api.AppendResult{Error: &api.Error{Code: api.CodeBadValue, Message: err.Error()}}, nil
	}
	return appenderResult(s.Appender.AppendSystem(ctx, space, raw))
}

// appenderResult maps an Appender result: a refusal is a result with
// Error; a publish failure is an error.
func appenderResult(r ledger.Result, err error) (api.AppendResult, error) {
	if err != nil {
		if _, refused := ledger.AsRefusal(err); refused {
			return ledger.WireResult(r), nil
		}
		return api.AppendResult{}, err
	}
	return ledger.WireResult(r), nil
}

// AppendAs appends raw through the ledger's one submit entry
// (Appender.AppendBody, the same validation as every submit path) under
// the subject whose sender token is sender instead of the envelope's from
// (contract §14 history mode; sender "" means the envelope's from): the fold
// then finds the two differ when the envelope's from was forged, and
// folds it invalid (spoofed_sender). sender "ledger" is refused
// (reserved_sender): the ledger's own envelopes are written only by the
// ledger.
func AppendAs(ctx context.Context, a *appendlog.Appender, space string, raw []byte, sender string) (ledger.Result, error) {
	return a.AppendBody(ctx, space, raw, ledger.BodyOptions{Sender: sender})
}

// HTTPSink appends through the ledger's HTTP API (POST /v1/events, POST
// /v1/gaps; a writer token when the API has tokens). It cannot publish
// under a given sender.
type HTTPSink struct {
	Client *client.Client
}

// Append implements Sink.
func (s HTTPSink) Append(ctx context.Context, space string, raw []byte, sender string) (api.AppendResult, error) {
	if sender != "" {
		return api.AppendResult{}, ErrSenderUnsupported
	}
	return httpResult(s.Client.Append(ctx, raw, client.WithSpace(space)))
}

// AppendBatch implements Sink: one NDJSON POST /v1/events, its answers
// streamed back in order.
func (s HTTPSink) AppendBatch(ctx context.Context, space string, batch []Envelope) ([]api.AppendResult, error) {
	lines := make([][]byte, len(batch))
	for i, e := range batch {
		if e.Sender != "" {
			return nil, ErrSenderUnsupported
		}
		lines[i] = e.Raw
	}
	if len(batch) > 0 && batch[0].Mark != "" {
		ctx = context.WithValue(ctx, markKey{}, batch[0].Mark)
	}
	var body bytes.Buffer
	for _, l := range lines {
		body.Write(l)
		body.WriteByte('\n')
	}
	var rs []api.AppendResult
	err := s.Client.AppendStream(ctx, &body, func(r api.AppendResult) error {
		rs = append(rs, r)
		return nil
	}, client.WithSpace(space))
	if err != nil {
		return nil, err
	}
	return batchResults(rs, len(batch))
}

// batchResults checks that a batch got one answer per envelope, and maps
// the answers that are not refusals (unavailable, shutting down) to an
// error: the batch is repeated.
func batchResults(rs []api.AppendResult, n int) ([]api.AppendResult, error) {
	if len(rs) != n {
		return nil, fmt.Errorf("bridge: the ledger answered %d of a batch of %d envelopes", len(rs), n)
	}
	for _, r := range rs {
		if r.Error != nil && retryable(r.Error.Code) {
			return nil, fmt.Errorf("bridge: batch: %s", r.Error.Error())
		}
	}
	return rs, nil
}

// retryable reports whether an error code answered for one envelope
// means "not stored, try again" rather than a refusal.
func retryable(code string) bool {
	switch code {
	case api.CodeUnavailable, api.CodeShuttingDown, api.CodeInternal:
		return true
	}
	return false
}

// Gap implements Sink.
func (s HTTPSink) Gap(ctx context.Context, space string, g ledger.Gap) (api.AppendResult, error) {
	return httpResult(s.Client.ReportGap(ctx, space, g))
}

// httpResult: 400 and 413 are refusals, anything else an error.
func httpResult(r api.AppendResult, err error) (api.AppendResult, error) {
	var ae *api.Error
	if errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge) {
		return api.AppendResult{Error: ae}, nil
	}
	return r, err
}
