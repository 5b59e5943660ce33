package bridge

import (
	"context"
	"errors"
	"net/http"

	"github.com/mewledger/ledger/internal/lib/apiclient"
	"github.com/mewledger/ledger/internal/lib/wire"
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
	// sender, under that sender's subject token (history mode, SPEC §14),
	// so that a from that differs is folded invalid (spoofed_sender). A
	// sink that cannot publish under another sender returns
	// ErrSenderUnsupported.
	Append(ctx context.Context, space string, raw []byte, sender string) (wire.AppendResult, error)
	// Gap asks the ledger to record a gap (ledger/gap, written by the
	// ledger itself with sender "ledger").
	Gap(ctx context.Context, space string, g ledger.Gap) (wire.AppendResult, error)
}

// Errors of sinks.
var (
	// ErrSenderUnsupported: the sink publishes only under the envelope's
	// from (the HTTP API); history mode needs NATS or the in-process sink.
	ErrSenderUnsupported = errors.New("bridge: this append path cannot publish under a given sender (history mode needs --nats-url or ledger serve --bridge-mew-config)")
)

// CodeReservedSender is the refusal code of an envelope whose real sender
// (the history file's received participant) is the ledger's own sender.
const CodeReservedSender = ledger.CodeReservedSender

// AppenderSink appends through the Appender of the ledger process the
// bridge runs in (ledger serve --bridge-mew-config): the same validation,
// dedup and group commit as every submit path.
type AppenderSink struct {
	Appender *appendlog.Appender
}

// Append implements Sink.
func (s AppenderSink) Append(ctx context.Context, space string, raw []byte, sender string) (wire.AppendResult, error) {
	return appenderResult(AppendAs(ctx, s.Appender, space, raw, sender))
}

// Gap implements Sink.
func (s AppenderSink) Gap(ctx context.Context, space string, g ledger.Gap) (wire.AppendResult, error) {
	raw, err := ledger.GapEnvelope(g)
	if err != nil {
		return wire.AppendResult{Error: &wire.Error{Code: ledger.CodeBadValue, Message: err.Error()}}, nil
	}
	return appenderResult(s.Appender.AppendSystem(ctx, space, raw))
}

// appenderResult maps an Appender result: a refusal is a result with
// Error; a publish failure is an error.
func appenderResult(r ledger.Result, err error) (wire.AppendResult, error) {
	if err != nil {
		if _, refused := ledger.AsRefusal(err); refused {
			return wire.FromResult(r), nil
		}
		return wire.AppendResult{}, err
	}
	return wire.FromResult(r), nil
}

// AppendAs appends raw through the ledger's one submit entry
// (Appender.AppendBody, the same validation as every submit path) under
// the subject whose sender token is sender instead of the envelope's from
// (SPEC §14 history mode; sender "" means the envelope's from): the fold
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
	Client *apiclient.Client
}

// Append implements Sink.
func (s HTTPSink) Append(ctx context.Context, space string, raw []byte, sender string) (wire.AppendResult, error) {
	if sender != "" {
		return wire.AppendResult{}, ErrSenderUnsupported
	}
	return httpResult(s.Client.Publish(ctx, space, raw))
}

// Gap implements Sink.
func (s HTTPSink) Gap(ctx context.Context, space string, g ledger.Gap) (wire.AppendResult, error) {
	return httpResult(s.Client.ReportGap(ctx, space, g))
}

// httpResult: 400 and 413 are refusals, anything else an error.
func httpResult(r wire.AppendResult, err error) (wire.AppendResult, error) {
	var ae *apiclient.APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge) {
		return wire.AppendResult{Error: ae.Wire()}, nil
	}
	return r, err
}
