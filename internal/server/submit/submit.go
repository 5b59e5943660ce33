// Package submit is the ledger's submit service (contract §8): NATS
// request/reply on ledger.submit.<space>, built on nats.go/micro so that
// `nats micro ls` / `nats micro info ledger-submit` show it.
//
// A request's body is one bare envelope; the space is the subject's last
// token. The envelope goes through the same entry as the HTTP path
// (appendlog.Appender.SubmitBody: the same validation). The reply body is
// always JSON (package wire):
//
//	{"id":"env-req-1","seq":12,"duplicate":false}
//	{"error":{"code":"missing_field","message":"...","field":"id"}}
//
// A bare kernel submission (a Proposal or KernelRequest object, contract §12)
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
// Refusals are answered through micro's Request.Error, so `nats micro
// stats` counts them as errors; a 503 for an envelope the stream did not
// acknowledge comes later, from a handler goroutine, and is not counted
// there (the ledger's metrics count it).
//
// Requests are validated and handed to the group commit one at a time on
// the endpoint's subscription, then awaited concurrently (up to
// Options.Concurrency requests in hand). Envelopes sent without waiting
// for each reply are usually stored in arrival order, but a batch the
// stream did not take whole is republished one by one, so the order is
// not promised; the fold tolerates any (orphans, contract §5.7). A client
// that needs an order waits for each reply before sending the next, as
// request/reply does.
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

	"github.com/mewledger/ledger/internal/lib/buildinfo"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// Defaults of Options.
const (
	DefaultName        = "ledger-submit"
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

// HeaderDefaultSpace set to "1" on a request to ledger.submit.~ (the
// encoding of the empty space) asks for the service's default space: the
// Submitter sends it when it is given no space. Without it, the empty
// space is refused naming the field: a space is never guessed (contract §10).
const HeaderDefaultSpace = "Ledger-Default-Space"

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("submit: invalid options")

// Appender is what the service needs of the ledger's appender: the one
// submit entry of every path (validation, bare-kernel wrapping, hand-off
// to the group commit). *appendlog.Appender implements it.
type Appender interface {
	SubmitBody(ctx context.Context, space string, body []byte, o ledger.BodyOptions) (*appendlog.Pending, error)
}

// Options configures the service.
type Options struct {
	// Appender appends the envelopes. Required.
	Appender Appender
	// Name and Version identify the micro service. Defaults
	// "ledger-submit" and the binary's version (buildinfo.Info.SemVer).
	Name    string
	Version string
	// Concurrency bounds the requests handled at once. Default 32.
	Concurrency int
	// Metrics, if set, counts appends and refusals (path "submit").
	Metrics *metrics.Metrics
	// Logger gets a start/stop line and errors.
	Logger zerolog.Logger
	// StorageProblem, if set, returns why the ledger cannot write (the
	// disk of the log is full), or "": while it is not "", requests are
	// answered at once with code storage_full (status
	// StatusUnavailable) instead of waiting on an append that cannot be
	// stored.
	StorageProblem func() string
	// StreamSeq returns the LEDGER stream's last sequence: a gap report
	// naming a later last_seq is refused (ledger.CodeGapAhead). Nil: not
	// checked.
	StreamSeq func(ctx context.Context) (uint64, error)
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Version == "" {
		o.Version = buildinfo.Get().SemVer() // the binary's version
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
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
func (s *Service) handle(req micro.Request) { s.dispatch(req, s.accept) }

// A request is served in two stages. accept runs on the endpoint's
// subscription goroutine, inside micro's accounting: it validates the
// request and hands its envelopes to the group commit (Appender.SubmitBody,
// which waits when the commit queue is full: backpressure), and answers a
// refusal at once through micro.Request.Error, so that `nats micro stats`
// counts it as an error. It returns the second stage, or nil when it has
// answered: a handler goroutine runs it to wait for the acknowledgements
// and reply (see reply). Micro has returned from the handler by then, so
// the second stage's answers (successes, and envelopes the stream did not
// acknowledge) are not in micro's error count; the ledger's metrics count
// them.

// dispatch runs accept for a request of any endpoint, holding one of
// Concurrency slots (waiting for one keeps the subscription's pending
// limits as backpressure) until the request is answered; a stopping
// service answers shutting_down.
func (s *Service) dispatch(req micro.Request, accept func(micro.Request) func()) {
	shuttingDown := api.AppendResult{Error: &api.Error{Code: api.CodeShuttingDown, Message: "the submit service is stopping; retry"}}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.answer(req, shuttingDown, StatusUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		s.wg.Done()
		s.answer(req, shuttingDown, StatusUnavailable)
		return
	}
	finish := accept(req)
	if finish == nil {
		<-s.sem
		s.wg.Done()
		return
	}
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		finish()
	}()
}

// accept is the submit endpoint's first stage (see dispatch).
func (s *Service) accept(req micro.Request) func() {
	if s.storageFull(req) {
		return nil
	}
	space, err := subjects.ParseSubmit(req.Subject())
	if err != nil && req.Subject() == subjects.Submit("") && req.Headers().Get(HeaderDefaultSpace) == "1" {
		space, err = "", nil // asked for the default space by name
	}
	if err != nil {
		// Cannot happen through the wildcard subscription but for a
		// badly encoded space token, or the empty space not asked for.
		s.refuse(req, badSpace(err))
		return nil
	}
	if items, batch, err := batchItems(req); batch {
		return s.acceptBatch(req, space, items, err)
	}
	if e := checkMark(req.Headers().Get(ledger.HeaderBridge)); e != nil {
		s.refuse(req, e)
		return nil
	}
	force, _ := strconv.ParseBool(req.Headers().Get(HeaderKernel))
	pd, err := s.opts.Appender.SubmitBody(s.ctx, space, req.Data(), ledger.BodyOptions{Kernel: force, Bridge: req.Headers().Get(ledger.HeaderBridge)})
	if err != nil {
		s.outcome(req, ledger.Result{Err: err}, s.answer)
		return nil
	}
	return func() {
		res, _ := pd.Result(s.ctx)
		s.outcome(req, res, s.reply)
	}
}

// outcome counts an append's result and answers it with send (answer in
// the first stage, reply in the second).
func (s *Service) outcome(req micro.Request, res ledger.Result, send func(micro.Request, api.AppendResult, string)) {
	out := ledger.WireResult(res)
	switch r, refused := ledger.AsRefusal(res.Err); {
	case res.Err == nil:
		s.opts.Metrics.Appended(metrics.PathSubmit, res.Duplicate)
		send(req, out, "")
	case refused:
		s.opts.Metrics.Refused(metrics.PathSubmit, r.Code)
		send(req, out, StatusRefused)
	case errors.Is(res.Err, ledger.ErrPublish):
		s.opts.Metrics.AppendError(metrics.PathSubmit)
		s.log.Warn().Err(res.Err).Msg("append not acknowledged")
		send(req, out, StatusUnavailable)
	default:
		s.log.Error().Err(res.Err).Msg("append failed")
		send(req, out, StatusInternal)
	}
}

// refuse counts and answers a request refused before anything was
// appended (a bad subject or body): an error reply micro counts.
func (s *Service) refuse(req micro.Request, e *api.Error) {
	s.opts.Metrics.Refused(metrics.PathSubmit, e.Code)
	s.answer(req, api.AppendResult{Error: e}, StatusRefused)
}

// storageFull answers req when the ledger cannot write, and reports
// whether it did.
func (s *Service) storageFull(req micro.Request) bool {
	if s.opts.StorageProblem == nil {
		return false
	}
	p := s.opts.StorageProblem()
	if p == "" {
		return false
	}
	s.opts.Metrics.AppendError(metrics.PathSubmit)
	s.answer(req, api.AppendResult{Error: &api.Error{Code: api.CodeStorageFull, Message: p}}, StatusUnavailable)
	return true
}

// badSpace is the refusal of a subject whose space token does not decode.
func badSpace(err error) *api.Error {
	return &api.Error{Code: api.CodeBadValue, Field: "space",
		Message: fmt.Sprintf("the subject's space token does not name a space (nothing is guessed): %v", err)}
}

// answer answers req from the first stage, on the subscription goroutine:
// through req.Error when status is set (the micro error headers
// Nats-Service-Error-Code and Nats-Service-Error, and micro counts the
// error), else req.Respond. Only inboxes are answered (see replyTo).
func (s *Service) answer(req micro.Request, body api.AppendResult, status string) {
	data, ok := s.replyTo(req, body)
	if !ok {
		return
	}
	var err error
	if status != "" {
		err = req.Error(status, body.Error.Code+": "+body.Error.Message, data)
	} else {
		err = req.Respond(data)
	}
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Debug().Err(err).Msg("reply")
	}
}

// reply answers req from the second stage, on a handler goroutine, with
// the same message answer sends. It publishes on the connection itself
// rather than through req.Respond or req.Error: those write the request,
// which micro reads once the handler has returned, and it returned before
// the second stage began (a data race otherwise).
func (s *Service) reply(req micro.Request, body api.AppendResult, status string) {
	data, ok := s.replyTo(req, body)
	if !ok {
		return
	}
	msg := &nats.Msg{Subject: req.Reply(), Data: data}
	if status != "" {
		msg.Header = nats.Header{
			micro.ErrorCodeHeader: []string{status},
			micro.ErrorHeader:     []string{body.Error.Code + ": " + body.Error.Message},
		}
	}
	err := s.nc.PublishMsg(msg)
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Debug().Err(err).Msg("reply")
	}
}

// replyTo returns the JSON reply body for req, and false when req is not
// to be answered: a publish (no reply subject: nobody to answer) or a
// reply subject that is not an inbox (the service publishes with its own
// rights, which reach the event subjects; issue 15, item 7).
func (s *Service) replyTo(req micro.Request, body api.AppendResult) ([]byte, bool) {
	if req.Reply() == "" {
		return nil, false
	}
	if !subjects.IsInbox(req.Reply()) {
		s.log.Warn().Str(logging.KeySubject, req.Reply()).Msg("submit reply subject is not an inbox (_INBOX.…): not answered")
		return nil, false
	}
	data, err := json.Marshal(body)
	if err != nil { // cannot happen: plain structs
		s.log.Error().Err(err).Msg("marshal reply")
		return nil, false
	}
	return data, true
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
func ParseReply(data []byte) (api.AppendResult, error) {
	var r api.AppendResult
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
