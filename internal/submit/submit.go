// Package submit is the ledger's submit service (SPEC §8): NATS
// request/reply on ledger.submit.<space>, built on nats.go/micro so that
// `nats micro ls` / `nats micro info ledger-submit` show it.
//
// A request's body is one bare envelope; the space is the subject's last
// token. The envelope goes through the same Appender (the same validation)
// as the HTTP path. The reply body is always JSON (package wire):
//
//	{"id":"env-req-1","seq":12,"duplicate":false}
//	{"error":{"code":"missing_field","message":"...","field":"id"}}
//
// A bare kernel submission (a Proposal or KernelRequest object, SPEC §12)
// is wrapped in its kernel/proposal envelope (ledger.WrapKernel, the time
// of the append as V-PROP-010's "now") and appended: recognised by
// ledger.MaybeBareKernel, or forced with the request header
// Ledger-Kernel: 1 (then a malformed one gets its V-PROP refusal rather
// than an envelope's). Refusals carry the rule id as code and the field
// relative to the bare object.
//
// An error reply also carries the micro error headers
// (Nats-Service-Error-Code: 400 for a refusal, 503 when the stream did not
// acknowledge and retrying is safe; Nats-Service-Error: "<code>: <message>").
//
// Requests are handled concurrently (up to Options.Concurrency): envelopes
// sent without waiting for each reply may be stored in any order, which
// the fold tolerates (orphans, SPEC §5.7). A client that needs an order
// waits for each reply before sending the next, as request/reply does.
//
// Stop stops taking requests, lets the ones in hand finish (bounded by its
// ctx) and returns when every handler goroutine has returned. The caller
// owns the connection and the Appender and closes them after Stop.
package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/logging"
	"github.com/mewledger/ledger/internal/metrics"
	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// Defaults of Options.
const (
	DefaultName        = "ledger-submit"
	DefaultVersion     = "0.1.0"
	DefaultEndpoint    = "submit"
	DefaultConcurrency = 32
)

// Micro error header codes of error replies.
const (
	StatusRefused     = "400"
	StatusUnavailable = "503"
	StatusInternal    = "500"
)

// HeaderKernel set to 1 (or true) on a request marks its body as a bare
// kernel submission.
const HeaderKernel = "Ledger-Kernel"

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("submit: invalid options")

// Appender is what the service needs of the ledger's appender.
type Appender interface {
	Append(ctx context.Context, space string, raw []byte) (ledger.Result, error)
}

// Options configures the service.
type Options struct {
	// Appender appends the envelopes. Required.
	Appender Appender
	// WrapKernel wraps a bare kernel submission into its envelope; nil
	// means the Appender's WrapKernel method when it has one (a
	// *ledger.Appender does).
	WrapKernel func(bare []byte) ([]byte, error)
	// Name and Version identify the micro service. Defaults
	// "ledger-submit", "0.1.0".
	Name    string
	Version string
	// Concurrency bounds the requests handled at once. Default 32.
	Concurrency int
	// Metrics, if set, counts appends and refusals (path "submit").
	Metrics *metrics.Metrics
	// Logger gets a start/stop line and errors.
	Logger zerolog.Logger
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.WrapKernel == nil {
		if k, ok := o.Appender.(interface{ WrapKernel([]byte) ([]byte, error) }); ok {
			o.WrapKernel = k.WrapKernel
		}
	}
	switch {
	case o.Appender == nil:
		return fmt.Errorf("%w: Appender is required", ErrOptions)
	case o.Concurrency < 1:
		return fmt.Errorf("%w: Concurrency %d, want ≥ 1", ErrOptions, o.Concurrency)
	}
	return nil
}

// Service is a running submit service.
type Service struct {
	opts Options
	svc  micro.Service
	log  zerolog.Logger

	sem chan struct{}
	// ctx is the handlers' context: cancelled when Stop's wait runs out.
	ctx    context.Context
	cancel context.CancelFunc

	// nc sends the replies (see reply).
	nc *nats.Conn

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup // handler goroutines
	once    sync.Once
	stopErr error
}

// Start registers the service on nc (one endpoint on
// subjects.SubmitWildcard, queue group "q" so several ledger processes
// share the load) and returns it running.
func Start(ctx context.Context, nc *nats.Conn, o Options) (*Service, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("submit: start: %w", err)
	}
	s := &Service{opts: o, nc: nc, sem: make(chan struct{}, o.Concurrency),
		log: o.Logger.With().Str(logging.KeyComponent, "submit").Logger()}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	svc, err := micro.AddService(nc, micro.Config{
		Name:        o.Name,
		Version:     o.Version,
		Description: "Proposal ledger submit service: append one MEW lifecycle envelope to the LEDGER stream (request on ledger.submit.<space>)",
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Error().Str(logging.KeySubject, e.Subject).Msg(e.Description)
		},
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("submit: add service: %w", err)
	}
	err = svc.AddEndpoint(DefaultEndpoint, micro.HandlerFunc(s.handle),
		micro.WithEndpointSubject(subjects.SubmitWildcard),
		micro.WithEndpointMetadata(map[string]string{
			"description": "request body: one envelope; reply: {\"id\",\"seq\",\"duplicate\"} or {\"error\":{\"code\",\"message\",\"field\"}}",
			"format":      "application/json",
		}))
	if err != nil {
		_ = svc.Stop()
		s.cancel()
		return nil, fmt.Errorf("submit: add endpoint %s: %w", subjects.SubmitWildcard, err)
	}
	if err := s.addGapEndpoint(svc); err != nil {
		_ = svc.Stop()
		s.cancel()
		return nil, err
	}
	s.svc = svc
	s.log.Info().Str(logging.KeyService, o.Name).Str(logging.KeySubject, subjects.SubmitWildcard).Msg("submit service started")
	return s, nil
}

// Info returns the micro service's info (name, id, endpoints).
func (s *Service) Info() micro.Info { return s.svc.Info() }

// Stats returns the micro service's stats.
func (s *Service) Stats() micro.Stats { return s.svc.Stats() }

// handle runs on the submit endpoint's subscription goroutine.
func (s *Service) handle(req micro.Request) { s.dispatch(req, s.serve) }

// dispatch hands a request of any endpoint to a handler goroutine running
// serve (waiting for a slot, which keeps the subscription's pending limits
// as backpressure); a stopping service answers shutting_down.
func (s *Service) dispatch(req micro.Request, serve func(micro.Request)) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.reply(req, wire.AppendResult{Error: &wire.Error{Code: wire.CodeShuttingDown, Message: "the submit service is stopping; retry"}}, StatusUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		s.wg.Done()
		s.reply(req, wire.AppendResult{Error: &wire.Error{Code: wire.CodeShuttingDown, Message: "the submit service is stopping; retry"}}, StatusUnavailable)
		return
	}
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		serve(req)
	}()
}

func (s *Service) serve(req micro.Request) {
	space, err := subjects.ParseSubmit(req.Subject())
	if err != nil {
		// Cannot happen through the wildcard subscription but for a
		// badly encoded space token.
		s.opts.Metrics.Refused(metrics.PathSubmit, ledger.CodeBadValue)
		s.reply(req, wire.AppendResult{Error: &wire.Error{Code: ledger.CodeBadValue, Field: "space",
			Message: fmt.Sprintf("the subject's space token is not a valid encoding: %v", err)}}, StatusRefused)
		return
	}
	if items, batch, err := batchItems(req); batch {
		s.serveBatch(req, space, items, err)
		return
	}
	var res ledger.Result
	env, err := s.envelope(req)
	if err != nil {
		res.Err = err
	} else {
		res, err = s.opts.Appender.Append(s.ctx, space, env)
	}
	out := wire.FromResult(res)
	switch r, refused := ledger.AsRefusal(err); {
	case err == nil:
		s.opts.Metrics.Appended(metrics.PathSubmit, res.Duplicate)
		s.reply(req, out, "")
	case refused:
		s.opts.Metrics.Refused(metrics.PathSubmit, r.Code)
		s.reply(req, out, StatusRefused)
	case errors.Is(err, ledger.ErrPublish):
		s.opts.Metrics.AppendError(metrics.PathSubmit)
		s.log.Warn().Err(err).Msg("append not acknowledged")
		s.reply(req, out, StatusUnavailable)
	default:
		s.log.Error().Err(err).Msg("append failed")
		s.reply(req, out, StatusInternal)
	}
}

// envelope returns the envelope to append for a request: its body, or
// the envelope a bare kernel submission is wrapped in.
func (s *Service) envelope(req micro.Request) ([]byte, error) {
	data := req.Data()
	if s.opts.WrapKernel == nil {
		return data, nil
	}
	force, _ := strconv.ParseBool(req.Headers().Get(HeaderKernel))
	if !force && !ledger.MaybeBareKernel(data) {
		return data, nil
	}
	return s.opts.WrapKernel(data)
}

// reply answers req with the JSON body, as a micro error (the
// Nats-Service-Error-Code and Nats-Service-Error headers) when status is
// set. It publishes on the connection itself rather than through
// req.Respond or req.Error: those write the request, which micro reads once
// the handler has returned — and the handler returned long ago, since
// replies come from handler goroutines (a data race otherwise).
func (s *Service) reply(req micro.Request, body wire.AppendResult, status string) {
	data, err := json.Marshal(body)
	if err != nil { // cannot happen: plain structs
		s.log.Error().Err(err).Msg("marshal reply")
		return
	}
	if req.Reply() == "" {
		return // a publish, not a request: nobody to answer
	}
	if !subjects.IsInbox(req.Reply()) {
		// Only inboxes: the service publishes with its own rights, which
		// reach the event subjects (issue 15, item 7).
		s.log.Warn().Str(logging.KeySubject, req.Reply()).Msg("submit reply subject is not an inbox (_INBOX.…): not answered")
		return
	}
	msg := &nats.Msg{Subject: req.Reply(), Data: data}
	if status != "" {
		msg.Header = nats.Header{
			micro.ErrorCodeHeader: []string{status},
			micro.ErrorHeader:     []string{body.Error.Code + ": " + body.Error.Message},
		}
	}
	err = s.nc.PublishMsg(msg)
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Debug().Err(err).Msg("reply")
	}
}

// Stop stops taking requests (late ones are answered shutting_down), waits
// for the requests in hand, and cancels their appends if ctx ends first.
// It is safe to call twice.
func (s *Service) Stop(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		if err := s.svc.Stop(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.stopErr = fmt.Errorf("submit: stop: %w", err)
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.cancel()
			<-done
		}
		s.cancel()
		s.log.Info().Str(logging.KeyService, s.opts.Name).Msg("submit service stopped")
	})
	return s.stopErr
}

// ParseReply decodes a submit-service reply body; it is what clients use.
func ParseReply(data []byte) (wire.AppendResult, error) {
	var r wire.AppendResult
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("submit: reply is not JSON: %w (%q)", err, truncate(data))
	}
	if r.Error == nil && r.Seq == 0 {
		return r, fmt.Errorf("submit: reply has neither seq nor error: %q", truncate(data))
	}
	return r, nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..." + strconv.Itoa(len(b)-200) + " more bytes"
	}
	return string(b)
}
