// Package api is the ledger's HTTP API (contract §7 audit queries, §8 the HTTP
// append path): JSON over Go's pattern ServeMux, every route under /v1
// except the probes and /metrics.
//
// Contract:
//   - Every error is {"error":{"code","message","field"}} (package wire),
//     including unknown routes (404 not_found) and wrong methods (405
//     method_not_allowed). Refusals of envelopes keep the ledger's refusal
//     code and field.
//   - Reads are served from a [Reader] (the Pebble projection); every read
//     takes min_seq=N and waits, bounded by Options.MinSeqWait, until the
//     projection has applied sequence N (read-your-writes), else 503
//     not_caught_up. Unknown query parameters and bad values are 400 with
//     the parameter's name as field: a typo must not silently widen an
//     audit query.
//   - Appends go through an [Appender] (the ledger's), with the same
//     validation as every other submit path: appendlog.Appender.PrepareBody.
//   - A bare kernel submission (a Proposal or KernelRequest object, contract
//     §12) POSTed to /v1/events is wrapped in its kernel/proposal envelope
//     (ledger.WrapKernel, the time of the append as V-PROP-010's "now")
//     and appended: recognised by ledger.MaybeBareKernel (no protocol
//     member, a proposal_id or request_id member), or forced with
//     ?kernel=1 (ledger.BodyOptions.Kernel: then every body, or NDJSON
//     line, is taken as bare, so a malformed one gets its V-PROP refusal
//     rather than an envelope's). Refusals carry the V-PROP rule id as
//     code and the field relative to the bare object.
//   - With Options.AsOf, every read but /v1/status takes as_of_seq=N or
//     as_of=RFC3339 and answers from the projection as of that point
//     (header Ledger-As-Of-Seq: the last sequence folded); a point beyond
//     the log is 400 beyond_log.
//   - With Options.Ops, the online operations are mounted under /v1/ops
//     (rebuild, its status, verify).
//   - With Options.Proofs, the verifiable-log routes (contract §16,
//     proofs.go): checkpoints, tiles, proposal and consistency proofs.
//   - The live Reader sits behind a RWMutex: [API.SwapReader] puts a new
//     one in its place while serving (reads wait for the swap, never see
//     a closed store).
//   - The API holds no long-lived goroutines: the few a request starts
//     (an NDJSON POST's writer, a watch's wait for the next commit) have
//     returned when its handler returns. The caller owns the http.Server
//     (see package app). Extra routes are added with
//     [API.Handle] and get the same error handling and metrics.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
)

// Defaults of Options.
const (
	DefaultSpace         = ledger.DefaultSpace
	DefaultMinSeqWait    = 5 * time.Second
	DefaultReadyLag      = 1000
	DefaultMaxBatchBytes = 64 << 20
	// NoLag as Options.ReadyLag means ready only when fully caught up.
	NoLag = -1
)

// Reader is what the read routes need from the projection.
// *projections.Store implements it; a point-in-time view can too.
type Reader interface {
	Get(space, id string) (*api.Proposal, error)
	History(space, key string) ([]api.HistoryEntry, error)
	List(q projections.ListQuery) (projections.ListPage, error)
	Stats(space string) (*api.Stats, error)
	AppliedSeq() uint64
	WaitApplied(ctx context.Context, seq uint64) error
}

// Appender is what POST /v1/events needs: the ledger's one submit entry
// (validation, bare-kernel wrapping, hand-off to the group commit).
// *appendlog.Appender implements it.
type Appender interface {
	SubmitBody(ctx context.Context, space string, body []byte, o ledger.BodyOptions) (*appendlog.Pending, error)
}

// StreamSeqFunc returns the last sequence of the LEDGER stream.
type StreamSeqFunc func(ctx context.Context) (uint64, error)

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("api: invalid options")

// Options configures the API.
type Options struct {
	// Reader serves the reads. Required.
	Reader Reader
	// Appender serves POST /v1/events; nil leaves the route out (a
	// read-only API).
	Appender Appender
	// StreamSeq feeds /v1/status and /readyz. Required.
	StreamSeq StreamSeqFunc
	// LogProblem, if set, returns what is wrong between the log and the
	// projection, or "": while it is not "", /readyz is 503 and
	// /v1/status carries it as log_problem.
	LogProblem func() string
	// StorageProblem, if set, returns why the ledger cannot write (the
	// disk of the log is full), or "": while it is not "", appends are
	// answered 503 storage_full at once and /readyz is 503 naming it.
	StorageProblem func() string
	// StorageDown, if set, returns a channel closed when (or once) the
	// ledger cannot write: appends waiting for their acknowledgement are
	// then answered 503 storage_full at once instead of waiting for one
	// that will not come.
	StorageDown func() <-chan struct{}
	// Space is the space of requests without ?space=. Default "default".
	Space string
	// MaxBodyBytes bounds a single-envelope POST body (413 beyond) and
	// each line of an NDJSON body (refused as oversize). Default
	// ledger.MaxEnvelopeBytes (1 MiB).
	MaxBodyBytes int64
	// MaxBatchBytes bounds a whole NDJSON body (413 beyond, nothing
	// appended). Default 64 MiB.
	MaxBatchBytes int64
	// MinSeqWait bounds a min_seq wait. Default 5s.
	MinSeqWait time.Duration
	// ReadyLag is the most events the projection may lag behind the stream
	// while /readyz says ready. 0 means DefaultReadyLag; NoLag means 0.
	ReadyLag int64
	// Metrics records request durations and append outcomes; nil records
	// nothing. /metrics is served when it is set.
	Metrics *metrics.Metrics
	// AsOf, if set, answers reads as of a past point (as_of_seq, as_of).
	AsOf AsOfFunc
	// Consumers, if set, lists the stream's consumers for GET /v1/status.
	Consumers func(ctx context.Context) ([]api.Consumer, error)
	// RawEvent reads one stored message by sequence for
	// GET /v1/events/{seq} (eventlog.go); nil answers that route 500.
	RawEvent RawEventFunc
	// Ops, if set, mounts the online operations under /v1/ops.
	Ops Ops
	// Proofs, if set, mounts the verifiable-log routes (proofs.go): the
	// checkpoints, the tree's tiles, proposal and consistency proofs.
	Proofs *proofs.Service
	// Integrity, if set, is the damage found in the log (contract §16):
	// while it holds some, every answer carries HeaderLogDamaged, /readyz
	// is 503, /v1/status names it, and an answer that meets it is 409
	// log_damaged (integrity.go).
	Integrity *integrity.State
	// ImportedThrough, if set, returns the stream's import marker for
	// /v1/status's import boundary.
	ImportedThrough func(ctx context.Context) (uint64, error)
	// Scrub, if set, feeds /v1/status's scrub progress.
	Scrub func() api.Scrub
	// SigningStopped, if set, says why checkpoint signing stopped (nil
	// while it signs).
	SigningStopped func() *api.SigningStopped
	// ProjectionHeld, if set, says where the projection is held on a
	// sequence missing from the stream (nil while it folds).
	ProjectionHeld func() *api.ProjectionHeld
	// Witnessing, if set, returns the witnesses' status for
	// GET /v1/status; WitnessAlarm, if set, a witness's refusal of the
	// ledger's history ("" when none): while it is not "", /readyz is 503
	// and /v1/status carries it as log_problem.
	Witnessing   func() *api.Witnessing
	WitnessAlarm func() string
	// Logger gets one debug line per request and an error line per
	// internal failure.
	Logger zerolog.Logger

	// GET /v1/watch (watch.go): the interval of heartbeats on an idle
	// stream (default 15s), the longest a write to a watcher may block
	// before the watcher is dropped (default 10s), and the most changes
	// read for a watcher at a time (default 256).
	HeartbeatInterval time.Duration
	WatchWriteTimeout time.Duration
	WatchPage         int
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Space == "" {
		o.Space = DefaultSpace
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = ledger.MaxEnvelopeBytes
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.MinSeqWait == 0 {
		o.MinSeqWait = DefaultMinSeqWait
	}
	if o.ReadyLag == 0 {
		o.ReadyLag = DefaultReadyLag
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeat
	}
	if o.WatchWriteTimeout == 0 {
		o.WatchWriteTimeout = DefaultWatchWriteTimeout
	}
	if o.WatchPage == 0 {
		o.WatchPage = DefaultWatchPage
	}
	switch {
	case o.Reader == nil:
		return fmt.Errorf("%w: Reader is required", ErrOptions)
	case o.StreamSeq == nil:
		return fmt.Errorf("%w: StreamSeq is required", ErrOptions)
	case o.MaxBodyBytes < 0 || o.MaxBodyBytes > ledger.MaxEnvelopeBytes:
		return fmt.Errorf("%w: MaxBodyBytes %d, want 1..%d", ErrOptions, o.MaxBodyBytes, ledger.MaxEnvelopeBytes)
	case o.MaxBatchBytes < o.MaxBodyBytes:
		return fmt.Errorf("%w: MaxBatchBytes %d is below MaxBodyBytes %d", ErrOptions, o.MaxBatchBytes, o.MaxBodyBytes)
	case o.HeartbeatInterval < 0 || o.WatchWriteTimeout < 0 || o.WatchPage < 0:
		return fmt.Errorf("%w: negative HeartbeatInterval, WatchWriteTimeout or WatchPage", ErrOptions)
	case o.MinSeqWait < 0:
		return fmt.Errorf("%w: negative MinSeqWait", ErrOptions)
	case o.ReadyLag < NoLag:
		return fmt.Errorf("%w: ReadyLag %d, want ≥ 0 or NoLag", ErrOptions, o.ReadyLag)
	case !validSpace(o.Space):
		return fmt.Errorf("%w: space %q is not 1..%d bytes of UTF-8", ErrOptions, o.Space, ledger.MaxSpaceBytes)
	}
	return nil
}

func (o *Options) readyBound() uint64 {
	if o.ReadyLag == NoLag {
		return 0
	}
	return uint64(o.ReadyLag)
}

// API is the HTTP API. Create it with New; serve [API.Handler].
type API struct {
	opts   Options
	mux    *routeMux
	log    zerolog.Logger
	reader *swapReader // the live projection
	watch  *watchers
}

// Route patterns. They are also the route label of the request metrics.
const (
	RouteGet     = "GET /v1/proposals/{id}"
	RouteHistory = "GET /v1/proposals/{id}/history"
	RouteList    = "GET /v1/proposals"
	RouteStats   = "GET /v1/stats"
	RouteStatus  = "GET /v1/status"
	RouteEvents  = "POST /v1/events"
	RouteHealth  = "GET /healthz"
	RouteReady   = "GET /readyz"
	RouteMetrics = "GET /metrics"
)

// New returns the API with every route of contract §7 and §8 mounted.
func New(o Options) (*API, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	a := &API{opts: o, mux: newRouteMux(), log: o.Logger.With().Str(logging.KeyComponent, "http").Logger(), reader: newSwapReader(o.Reader), watch: newWatchers()}
	a.mux.HandleFunc(RouteGet, a.getProposal)
	a.mux.HandleFunc(RouteHistory, a.getHistory)
	a.mux.HandleFunc(RouteList, a.list)
	a.mux.HandleFunc(RouteStats, a.stats)
	a.mux.HandleFunc(RouteGaps, a.gaps)
	a.mux.HandleFunc(RouteHoles, a.holes)
	a.mux.HandleFunc(RouteEventList, a.listEvents)
	a.mux.HandleFunc(RouteEvent, a.getEvent)
	a.mux.HandleFunc(RouteBridges, a.bridges)
	a.mux.HandleFunc(RouteStatus, a.status)
	a.mux.HandleFunc(RouteWatch, a.watchChanges)
	a.mux.HandleFunc(RouteChanges, a.listChanges)
	a.mux.HandleFunc(RouteHealth, a.healthz)
	a.mux.HandleFunc(RouteReady, a.readyz)
	a.mux.HandleFunc(RouteOpenAPI, a.openAPI)
	if o.Appender != nil {
		a.mux.HandleFunc(RouteEvents, a.postEvents)
		a.mountGapWrite()
	}
	if o.Ops != nil {
		a.mux.HandleFunc(RouteOpsRebuild, a.postRebuild)
		a.mux.HandleFunc(RouteOpsRebuildStatus, a.getRebuild)
		a.mux.HandleFunc(RouteOpsVerify, a.postVerify)
	}
	if o.Proofs != nil {
		a.mountProofs()
	}
	if o.Metrics != nil {
		a.mux.Handle(RouteMetrics, o.Metrics.Handler())
	}
	return a, nil
}

// Handle mounts an extra route (a Go ServeMux pattern, method included).
// Call it before serving.
func (a *API) Handle(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

// Handler returns the API's handler: routing, JSON 404/405, panic
// recovery and request metrics around the mux. The routes mounted when it
// is called have their duration series from the start, but the streams.
func (a *API) Handler() http.Handler {
	var timed []string
	for _, r := range a.Routes() {
		if r != RouteWatch && !strings.HasSuffix(r, " /mcp") {
			timed = append(timed, r)
		}
	}
	a.opts.Metrics.HTTPRoutes(timed)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w}
		route := "unmatched"
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				a.log.Error().Str(logging.KeyRoute, route).Interface("panic", p).Msg("handler panicked")
				if !rec.wrote {
					writeError(rec, http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: "internal error; see the server log"})
				}
			}
			took := time.Since(start)
			if !isStream(rec) {
				a.opts.Metrics.HTTPRequest(route, rec.code(), took)
			}
			a.log.Debug().Str(logging.KeyMethod, r.Method).Str(logging.KeyPath, r.URL.Path).
				Int(logging.KeyStatus, rec.code()).Dur(logging.KeyTook, took).Msg("request")
		}()
		a.markDamaged(rec)
		if refuseBadQuery(rec, r) {
			return
		}
		if _, pattern := a.mux.Handler(r); pattern != "" {
			route = pattern
			a.mux.ServeHTTP(rec, r)
			return
		}
		a.unmatched(rec, r)
	})
}

// unmatched answers a request no pattern matches with the mux's status
// (404, or 405 with its Allow header) and a JSON error body.
func (a *API) unmatched(w http.ResponseWriter, r *http.Request) {
	h, _ := a.mux.Handler(r)
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status >= 300 && probe.status < 400 {
		h.ServeHTTP(w, r) // the mux's redirect to the clean path
		return
	}
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if probe.status == http.StatusMethodNotAllowed {
		writeError(w, http.StatusMethodNotAllowed, &api.Error{Code: api.CodeMethodNotAllowed,
			Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, probe.header.Get("Allow"))})
		return
	}
	writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
}

// probeWriter captures what the mux's own 404/405 handler would answer.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header         { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) { return len(b), nil }
func (p *probeWriter) WriteHeader(code int)        { p.status = code }

// statusWriter records the status written.
// isStream reports whether the answer was an event stream (/v1/watch,
// the MCP endpoint's SSE): kept out of the request-duration histogram.
func isStream(w http.ResponseWriter) bool {
	return strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.status, s.wrote = http.StatusOK, true
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) code() int {
	if !s.wrote {
		return http.StatusOK
	}
	return s.status
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = newEncoder(w).Encode(v) // an error means the client went away: nothing to do
}

// writeError writes {"error":e} with status.
func writeError(w http.ResponseWriter, status int, e *api.Error) {
	writeJSON(w, status, api.ErrorBody{Error: e})
}

// internal logs err and answers 500.
func (a *API) internal(w http.ResponseWriter, r *http.Request, err error) {
	if a.logDamaged(w, err) {
		return
	}
	a.log.Error().Err(err).Str(logging.KeyMethod, r.Method).Str(logging.KeyPath, r.URL.Path).Msg("request failed")
	writeError(w, http.StatusInternalServerError, &api.Error{Code: api.CodeInternal, Message: "internal error; see the server log"})
}

// storageFull answers 503 storage_full when the ledger cannot write, and
// reports whether it did.
func (a *API) storageFull(w http.ResponseWriter) bool {
	if a.opts.StorageProblem == nil {
		return false
	}
	p := a.opts.StorageProblem()
	if p == "" {
		return false
	}
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeStorageFull, Message: p})
	return true
}

// storageCtx is ctx, also cancelled when the storage goes down.
func (a *API) storageCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.opts.StorageDown == nil {
		return context.WithCancel(ctx)
	}
	down := a.opts.StorageDown()
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-down:
			cancel()
		case <-c.Done():
		}
	}()
	return c, cancel
}

func validSpace(s string) bool {
	return s != "" && s != AllSpaces && len(s) <= ledger.MaxSpaceBytes && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}
