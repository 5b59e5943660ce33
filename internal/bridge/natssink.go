package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// DefaultRequestTimeout bounds one NATS request of a NATSSink when ctx has
// no deadline.
const DefaultRequestTimeout = 30 * time.Second

// NATSSink appends through the ledger's NATS services: envelopes to the
// submit service (ledger.submit.<space>), gaps to its gap endpoint
// (ledger.gap.<space>), and, for history mode, envelopes published
// directly to the LEDGER stream under the received sender's subject
// (AppendAs; the stream dedups by Nats-Msg-Id). The caller owns nc.
type NATSSink struct {
	nc       *nats.Conn
	appender *appendlog.Appender
	// Sessions reads the ledger's bridge sessions (the submit service
	// does not serve them: an HTTPSink of the same ledger); nil: the
	// bridge cannot learn how its last session ended.
	Sessions SessionReader
}

// NewNATSSink returns a sink on nc. It does no I/O.
func NewNATSSink(nc *nats.Conn) (*NATSSink, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("bridge: jetstream: %w", err)
	}
	a, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	return &NATSSink{nc: nc, appender: a}, nil
}

// Close releases the sink's appender (not the connection).
func (s *NATSSink) Close() { s.appender.Close() }

// Append implements Sink.
func (s *NATSSink) Append(ctx context.Context, space string, raw []byte, sender string) (api.AppendResult, error) {
	if sender != "" {
		return appenderResult(AppendAs(ctx, s.appender, space, raw, sender))
	}
	return s.request(ctx, subjects.Submit(space), raw)
}

// AppendBatch implements Sink: one batch request (NDJSON) on the submit
// service, at most submit.MaxBatchEnvelopes envelopes; with senders
// (history mode), named in the request's submit.HeaderSenders, so that
// the ledger seals the batch's mark as it does every recorder's.
func (s *NATSSink) AppendBatch(ctx context.Context, space string, batch []Envelope) ([]api.AppendResult, error) {
	var senders []string
	for _, e := range batch {
		if e.Sender != "" {
			senders = make([]string, len(batch))
			for i, e := range batch {
				senders[i] = e.Sender
			}
			break
		}
	}
	if len(batch) > submit.MaxBatchEnvelopes {
		return nil, fmt.Errorf("bridge: a batch of %d envelopes is over the submit service's %d", len(batch), submit.MaxBatchEnvelopes)
	}
	var body bytes.Buffer
	for _, e := range batch {
		body.Write(e.Raw)
		body.WriteByte('\n')
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	subject := subjects.Submit(space)
	msg := nats.NewMsg(subject)
	msg.Header.Set(submit.HeaderContentType, "application/x-ndjson")
	if batch[0].Mark != "" {
		msg.Header.Set(ledger.HeaderBridge, batch[0].Mark)
	}
	if senders != nil {
		msg.Header.Set(submit.HeaderSenders, submit.EncodeSenders(senders))
	}
	msg.Data = body.Bytes()
	reply, err := s.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("bridge: no ledger service answers on %s (is `ledger serve` running against this NATS?)", subject)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge: batch request on %s: %w", subject, err)
	}
	var rs []api.AppendResult
	for _, line := range bytes.Split(reply.Data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r api.AppendResult
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("bridge: batch reply on %s: %w", subject, err)
		}
		rs = append(rs, r)
	}
	if len(rs) == 1 && len(batch) != 1 && rs[0].Error != nil {
		// The whole request was refused or failed.
		if retryable(rs[0].Error.Code) {
			return nil, fmt.Errorf("bridge: %s: %s", subject, rs[0].Error.Error())
		}
		return nil, fmt.Errorf("bridge: %s refused the batch: %s", subject, rs[0].Error.Error())
	}
	return batchResults(rs, len(batch))
}

// Gap implements Sink.
func (s *NATSSink) Gap(ctx context.Context, space string, g ledger.Gap) (api.AppendResult, error) {
	body, err := json.Marshal(g)
	if err != nil {
		return api.AppendResult{}, fmt.Errorf("bridge: gap: %w", err)
	}
	return s.request(ctx, subjects.Gap(space), body)
}

// request sends one request and maps the reply: a refusal is a result
// with Error; no responder, a timeout, or a retryable error reply
// (unavailable, shutting_down, internal) is an error.
func (s *NATSSink) request(ctx context.Context, subject string, body []byte) (api.AppendResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	msg, err := s.nc.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return api.AppendResult{}, fmt.Errorf("bridge: no ledger service answers on %s (is `ledger serve` running against this NATS?)", subject)
	}
	if err != nil {
		return api.AppendResult{}, fmt.Errorf("bridge: request on %s: %w", subject, err)
	}
	r, err := submit.ParseReply(msg.Data)
	if err != nil {
		return api.AppendResult{}, err
	}
	if r.Error != nil {
		switch r.Error.Code {
		case api.CodeUnavailable, api.CodeShuttingDown, api.CodeInternal:
			return api.AppendResult{}, fmt.Errorf("bridge: %s: %s", subject, r.Error.Error())
		}
	}
	return r, nil
}
