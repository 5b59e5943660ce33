// Package app wires the whole ledger into one process: the embedded NATS
// server (or a connection to existing servers), the LEDGER stream, the
// Pebble projection, the projector, the expirer, the submit service and the
// HTTP API. `ledger serve` is New + Run; tests and benchmarks run the same
// thing in-process.
//
// Ownership and order. New acquires everything (and releases whatever it
// acquired when it fails); Run starts the goroutines and returns after an
// orderly shutdown when its ctx is cancelled or Close is called, or when a
// component fails (then with that error). Each goroutine has one owner
// that stops it and waits for it during that shutdown: Run itself for the
// HTTP server's (an errgroup) and the log check's (a done channel), the
// pipeline for its projector's and expirer's (pipeline.stop), the submit
// service for its handlers' (Stop), and stopOps for an online rebuild's
// or verify's (a WaitGroup). The shutdown order
// is: cancel an online operation in hand (rebuild_verify.go) → stop accepting HTTP
// (requests in hand finish, bounded by ShutdownTimeout) → stop the submit
// service (requests in hand finish) → stop the log check → stop the
// expirer → drain the projector (it folds and commits the batch in hand)
// → close the Pebble store → drain the NATS connection → stop the
// embedded server. Close is safe to call twice and from any goroutine;
// after Run returns, everything is released.
//
// The projection (Pebble store, projector, expirer) is a pipeline that an
// online rebuild replaces while the ledger serves (rebuild_verify.go): the API reads
// through a swappable reader, and Store and Projector return the current
// ones. An online rebuild or verify in hand is cancelled first at
// shutdown.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/lib/datalock"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/internal/server/console"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/internal/server/mcp"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/internal/server/origin"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
)

// ErrClosed is returned by Run after Close, or when Run is called twice.
var ErrClosed = errors.New("app: closed")

// App is one running ledger.
type App struct {
	opts Options
	log  zerolog.Logger

	// markKeys seal the bridge marks the appender stores and verify them
	// in every fold of this ledger (folder: live, rebuild, as-of;
	// marks.go).
	markKeys *ledger.MarkKeys
	folder   *fold.Folder

	lock      *datalock.Lock // <data> is ours while held
	addrWrote bool           // the address file is ours to remove

	srv      *natsserver.Server // nil with NATSURLs
	nc       *nats.Conn
	ncClosed chan struct{}
	natsURL  string
	js       jetstream.JetStream
	stream   jetstream.Stream
	appender *appendlog.Appender
	metrics  *metrics.Metrics
	asOf     *asOfCache
	api      *httpapi.API
	httpSrv  *http.Server
	inner    http.Handler // the API's handler inside the middleware, without the body deadlines
	mcp      *mcp.Server  // mounted at /mcp (mcp.go)
	mcpHTTP  *mcp.HTTPHandler
	ln       net.Listener
	budget   *connbudget.Budget // nil when MaxConns < 0
	streams  *connbudget.Streams
	holds    *connbudget.Holds
	submit   *submit.Service // set by Run

	pmu  sync.Mutex
	pipe *pipeline // the current projection; replaced by an online rebuild

	proofs     *proofs.Service    // checkpoints and proofs (proofs.go)
	stopProofs func()             // cancels the signer and waits for it
	witnesses  *witness.Submitter // nil: no witnesses

	logState logState            // logcheck.go
	damage   *integrity.State    // the damage found in the log (scrub.go)
	scrub    *integrity.Scrubber // re-reads the stream (scrub.go)
	heldMu   sync.Mutex
	heldSeq  uint64       // the missing sequence the projector is held at (projection_held.go)
	storage  storageState // diskfull.go
	disk     diskBudget   // the ledger's files on its volume (diskbudget.go)

	// Online operations (rebuild_verify.go).
	opsMu     sync.Mutex
	opsBusy   string // the operation running ("rebuild", "verify"), or ""
	opsClosed bool   // shutting down: no new operation
	rebuild   api.RebuildStatus
	rebuildCh chan struct{} // closed when the running rebuild ends
	opsCtx    context.Context
	opsCancel context.CancelFunc
	opsWG     sync.WaitGroup

	// fail is set by Run: a component failure shuts the ledger down.
	fail func(error)

	mu        sync.Mutex
	running   bool
	ran       bool
	stop      chan struct{} // closed by Close
	stopOnce  sync.Once
	runDone   chan struct{} // closed when Run returns
	ready     chan struct{} // closed when Run has started everything
	closeOnce sync.Once
	closeErr  error
}

// New validates o and acquires everything: data directory, NATS (embedded
// or connected), the LEDGER stream, the store, the HTTP listener. Nothing
// is served until Run. On error everything acquired is released.
func New(ctx context.Context, o Options) (a *App, err error) {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if warn, err := fitDescriptors(&o); err != nil {
		return nil, err
	} else if warn != "" {
		o.Logger.Warn().Msg(warn)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	a = &App{opts: o, log: o.Logger, stop: make(chan struct{}), runDone: make(chan struct{}), ready: make(chan struct{})}
	self := a // the named result is nil after `return nil, err`
	defer func() {
		if err != nil {
			_ = self.release(context.Background())
		}
	}()
	// The lock comes before anything else in <data> is touched: a second
	// process on the same directory must not start a NATS server on the
	// live JetStream store, nor touch its projection or address file.
	if a.lock = o.DataLock; a.lock == nil {
		if a.lock, err = datalock.Acquire(o.DataDir); err != nil {
			return nil, fmt.Errorf("app: data directory: %w", err)
		}
	}
	a.disk = newDiskBudget(o.DataDir, o)
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	if err := a.prepareDirs(); err != nil {
		return nil, err
	}
	if err := a.openMarkKeys(); err != nil {
		return nil, err
	}
	store, err := a.openStore()
	if err != nil {
		return nil, err
	}
	a.damage = &integrity.State{}
	// The stream, checked against the projection (logcheck.go): never
	// created afresh under a projection that has folded events.
	if err := a.openStream(ctx, store); err != nil {
		_ = store.Close()
		return nil, err
	}
	// The projection is the appender's index of stored envelopes: a retry
	// is a duplicate for ever on every append path (contract §4).
	if a.appender, err = appendlog.NewAppender(a.js, appendlog.AppenderOptions{Space: o.Space, Limits: o.Limits,
		Commit: appendlog.CommitOptionsForSync(o.SyncInterval, o.Embedded()),
		Index:  storedIndex{a}, MarkKeys: a.markKeys}); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("app: %w", err)
	}
	a.metrics = metrics.New(a.lag)
	if a.pipe, err = a.newPipeline(store); err != nil {
		_ = store.Close()
		return nil, err
	}
	if err := a.openProofs(); err != nil {
		return nil, err
	}
	if err := a.openScrub(); err != nil {
		return nil, err
	}
	a.asOf = newAsOfCache(a.js, o.TmpDir(), a.folder, o.Logger.With().Str(logging.KeyComponent, "as-of").Logger())
	a.asOf.metrics, a.asOf.room = a.metrics, a.asOfRoom
	a.opsCtx, a.opsCancel = context.WithCancel(context.Background())
	a.rebuild = api.RebuildStatus{Phase: api.RebuildIdle}
	maxBody := int64(0)
	if o.Limits.MaxBytes > 0 {
		maxBody = int64(o.Limits.MaxBytes)
	}
	if a.api, err = httpapi.New(httpapi.Options{
		Reader:         store,
		Appender:       a.appender,
		StreamSeq:      a.streamSeq,
		LogProblem:     a.LogProblem,
		StorageProblem: a.StorageProblem,
		StorageDown:    a.StorageDown,
		Space:          o.Space,
		MinSeqWait:     o.MinSeqWait,
		ReadyLag:       o.ReadyLag,
		MaxBodyBytes:   maxBody,
		MaxBatchBytes:  o.MaxBatchBytes,
		Metrics:        a.metrics,
		AsOf:           a.asOf.get,
		RawEvent:       a.rawEvent,
		Consumers:      a.consumers,
		Ops:            a,
		Proofs:         a.proofs,
		Integrity:      a.damage,
		Scrub:          a.scrub.Status,
		ImportedThrough: func(ctx context.Context) (uint64, error) {
			info, err := a.stream.Info(ctx)
			if err != nil {
				return 0, err
			}
			return ledger.ImportedThrough(info.Config.Metadata), nil
		},
		SigningStopped: a.proofs.SigningStopped,
		ProjectionHeld: a.ProjectionHeld,
		Witnessing:     a.witnessing,
		WitnessAlarm:   a.witnessAlarm,
		Logger:         o.Logger,
	}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	var lc net.ListenConfig
	if a.ln, err = lc.Listen(ctx, "tcp", o.HTTPAddr); err != nil {
		return nil, fmt.Errorf("app: HTTP listen: %w", err)
	}
	// The connection budget (issue 29 items 1–3): anonymous connections
	// cannot take the slots authenticated ones need; long streams have
	// caps of their own.
	httpLog := o.Logger.With().Str(logging.KeyComponent, "http").Logger()
	if o.MaxConns > 0 {
		if a.budget, err = connbudget.New(connbudget.Options{MaxConns: o.MaxConns, AnonConns: o.AnonConns, AnonPerIP: o.AnonPerIP,
			AnonIdleTimeout: o.AnonIdleTimeout, Authenticating: o.HTTPAuthenticating, Logger: httpLog}); err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		a.ln = a.budget.Listener(a.ln)
	}
	if a.streams, err = connbudget.NewStreams(connbudget.StreamOptions{Max: o.MaxStreams, PerClient: o.StreamsPerClient, Client: streamClient,
		Authenticating: o.HTTPAuthenticating}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if a.holds, err = connbudget.NewHolds(connbudget.HoldOptions{Max: o.MaxHolds, PerClient: o.HoldsPerClient, Client: streamClient,
		Authenticating: o.HTTPAuthenticating}); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	browsers, err := origin.New(origin.Options{ListenAddr: o.HTTPAddr, Hosts: o.HTTPHosts})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	a.api.Handle(console.Pattern, console.Handler())
	if err := a.mountMCP(); err != nil {
		return nil, err
	}
	a.registerHeld()
	// Inside the authentication, so that a stream's client is its token
	// and a client without the right token hears 401/403 before 415.
	// Requests that wait on their body or on the server are counted
	// per caller (issue 36 item 2).
	handler := browsers.WrapBody(a.holds.Wrap(a.streams.WrapIf(a.api.Handler(), IsStream)))
	if o.HTTPMiddleware != nil {
		if handler, err = o.HTTPMiddleware(handler); err != nil {
			return nil, fmt.Errorf("app: HTTP middleware: %w", err)
		}
	}
	// The MCP tools call this handler in-process (mcp.go): tokens, roles
	// and space scopes apply to them as to any request.
	a.inner = handler
	// Host and Origin before anything else reads the request; outermost,
	// the body deadlines cover whatever reads the body and close the
	// connection of an early refusal (httpserver.go).
	handler = browsers.Wrap(handler)
	handler = bodyDeadlines(handler, o.BodyIdleTimeout, o.BodyTimeout)
	a.httpSrv = &http.Server{
		Handler:           handler,
		TLSConfig:         o.TLSConfig,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       DefaultHTTPIdleTimeout,
		ErrorLog:          zerologStd(httpLog),
	}
	if a.budget != nil {
		a.httpSrv.ConnState = a.budget.ConnState
		a.httpSrv.ConnContext = a.budget.ConnContext
	}
	a.httpSrv.RegisterOnShutdown(a.api.StopWatches) // Shutdown does not end streams
	a.httpSrv.RegisterOnShutdown(a.closeMCP)
	return a, nil
}

// connect starts the embedded server (or not) and connects to NATS.
func (a *App) connect(ctx context.Context) error {
	a.ncClosed = make(chan struct{})
	opts := []nats.Option{
		nats.Name("ledger serve"),
		nats.MaxReconnects(-1),
		nats.ClosedHandler(func(*nats.Conn) { close(a.ncClosed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				a.log.Warn().Err(err).Msg("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			a.log.Info().Str(logging.KeyNATSURL, nc.ConnectedUrlRedacted()).Msg("NATS reconnected")
		}),
	}
	opts = append(opts, a.opts.NATSOptions...)
	var err error
	if a.opts.Embedded() {
		host, port, _ := a.opts.natsHostPort()              // checked by Validate
		monHost, monPort, _ := a.opts.natsMonitorHostPort() // checked by Validate
		a.srv, err = natsserver.Start(ctx, natsserver.Options{
			StoreDir:     a.opts.NATSDir(),
			Host:         host,
			Port:         port,
			MonitorHost:  monHost,
			MonitorPort:  monPort,
			SyncInterval: a.opts.SyncInterval,
			SyncAlways:   a.opts.SyncInterval == 0,
			ConfigFile:   a.opts.NATSConfigFile,
			Logger:       a.opts.Logger,
			OnStoreError: a.storeWriteFailed,
		})
		if err != nil {
			return fmt.Errorf("app: embedded NATS server: %w", err)
		}
		a.natsURL = a.srv.ClientURL()
		// The ledger's own connection is in-process: no port, no TCP.
		a.nc, err = nats.Connect("", append(opts, nats.InProcessServer(a.srv.NatsServer()))...)
	} else {
		a.nc, err = nats.Connect(strings.Join(a.opts.NATSURLs, ","), append(opts, nats.Timeout(5*time.Second))...)
	}
	if err != nil {
		a.ncClosed = nil // no connection, nothing will close it
		return fmt.Errorf("app: connect to NATS: %w", err)
	}
	if !a.opts.Embedded() {
		a.natsURL = a.nc.ConnectedUrlRedacted()
	}
	if a.js, err = jetstream.New(a.nc); err != nil {
		return fmt.Errorf("app: jetstream: %w", err)
	}
	return nil
}

// IsStream reports whether r is a long-lived request the stream caps
// count: GET /v1/watch and everything under /mcp.
func IsStream(r *http.Request) bool {
	p := r.URL.Path
	return p == "/v1/watch" || p == "/mcp" || strings.HasPrefix(p, "/mcp/")
}

// streamClient names a stream's client: its token when it authenticated,
// else "" (its remote address).
func streamClient(r *http.Request) string {
	if p, ok := httpauth.FromContext(r.Context()); ok {
		return "token:" + p.Name
	}
	return ""
}

// Streams is the cap of long-lived requests. A handler mounted on the API
// (API().Handle) at a path IsStream accepts is capped already; one served
// otherwise wraps itself with Streams().Wrap.
func (a *App) Streams() *connbudget.Streams { return a.streams }

// Holds is the cap of requests waiting on a body or a server wait.
func (a *App) Holds() *connbudget.Holds { return a.holds }

// Budget is the HTTP connection budget (nil when MaxConns < 0).
func (a *App) Budget() *connbudget.Budget { return a.budget }

// HTTPAddr is the API's actual listen address (host:port).
func (a *App) HTTPAddr() string { return a.ln.Addr().String() }

// HTTPURL is http://HTTPAddr (https:// with TLSConfig).
func (a *App) HTTPURL() string {
	if a.opts.TLSConfig != nil {
		return "https://" + a.HTTPAddr()
	}
	return "http://" + a.HTTPAddr()
}

// NATSURL is the URL clients use to reach the ledger's NATS: the embedded
// server's client URL, or the connected server.
func (a *App) NATSURL() string { return a.natsURL }

// Options returns the validated options.
func (a *App) Options() Options { return a.opts }

// Store, Projector, Appender, Conn, JetStream and Metrics expose the parts
// for tests, benchmarks and ops commands. The App owns them: do not close
// them. Store and Projector are the current ones: an online rebuild
// replaces both (and closes the old store).
func (a *App) Store() *projections.Store       { return a.current().store }
func (a *App) Projector() *projector.Projector { return a.current().proj }
func (a *App) Appender() *appendlog.Appender   { return a.appender }
func (a *App) Conn() *nats.Conn                { return a.nc }
func (a *App) JetStream() jetstream.JetStream  { return a.js }
func (a *App) Metrics() *metrics.Metrics       { return a.metrics }
func (a *App) API() *httpapi.API               { return a.api }
func (a *App) Submit() *submit.Service         { return a.submit }
func (a *App) NATSServer() *natsserver.Server  { return a.srv }
func (a *App) Ready() <-chan struct{}          { return a.ready }
func (a *App) streamSeq(ctx context.Context) (uint64, error) {
	info, err := a.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("app: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// lag feeds the metrics' lag gauges.
func (a *App) lag(ctx context.Context) (uint64, uint64, error) {
	last, err := a.streamSeq(ctx)
	if err != nil {
		return 0, 0, err
	}
	return last, a.api.Reader().AppliedSeq(), nil
}

// Run serves until ctx is cancelled or Close is called (then it returns
// nil after the orderly shutdown), or until a component fails (then it
// shuts down the rest and returns the failure). Everything is released
// when it returns. It may be called once.
func (a *App) Run(ctx context.Context) (err error) {
	a.mu.Lock()
	if a.ran {
		a.mu.Unlock()
		return ErrClosed
	}
	a.ran, a.running = true, true
	a.mu.Unlock()
	defer close(a.runDone)
	select {
	case <-a.stop:
		return errors.Join(ErrClosed, a.release(context.Background()))
	default:
	}

	base := context.WithoutCancel(ctx)
	a.submit, err = submit.Start(base, a.nc, submit.Options{Appender: a.appender, Metrics: a.metrics, Logger: a.opts.Logger, StreamSeq: a.streamSeq,
		StorageProblem: a.StorageProblem})
	if err != nil {
		return errors.Join(fmt.Errorf("app: %w", err), a.release(context.Background()))
	}
	// The service's subscriptions reach the server before Ready says the
	// ledger serves (a request right after could find no responders).
	if err := a.nc.FlushTimeout(5 * time.Second); err != nil {
		a.log.Warn().Err(err).Msg("flush after starting the submit service")
	}

	var (
		g        errgroup.Group
		failOnce sync.Once
		failed   = make(chan struct{})
		failErr  error
	)
	fail := func(err error) {
		failOnce.Do(func() { failErr = err; close(failed) })
	}
	a.fail = fail
	start := func(name string, f func() error) <-chan struct{} {
		done := make(chan struct{})
		g.Go(func() error {
			defer close(done)
			if err := f(); err != nil {
				a.log.Error().Err(err).Str(logging.KeyComponent, name).Msg("component failed; shutting down")
				fail(fmt.Errorf("app: %s: %w", name, err))
				return err
			}
			return nil
		})
		return done
	}
	httpDone := start("http", func() error {
		serve := func() error { return a.httpSrv.Serve(a.ln) }
		if a.opts.TLSConfig != nil {
			serve = func() error { return a.httpSrv.ServeTLS(a.ln, "", "") }
		}
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	a.current().start(base, a.pipelineFailed)
	a.startProofs(base)
	checkCtx, stopCheck := context.WithCancel(base)
	defer stopCheck()
	checkDone := make(chan struct{})
	go func() {
		defer close(checkDone)
		a.runLogCheck(checkCtx)
	}()
	scrubDone := make(chan struct{})
	go func() {
		defer close(scrubDone)
		_ = a.scrub.Run(checkCtx)
	}()
	storageDone := make(chan struct{})
	go func() {
		defer close(storageDone)
		a.runStorageWatch(checkCtx)
	}()

	if err := a.writeAddrFile(); err != nil {
		a.log.Error().Err(err).Msg("cannot write the address file")
		fail(err)
	}
	a.log.Info().
		Str(logging.KeyHTTPAddr, a.HTTPAddr()).
		Str(logging.KeyNATSURL, a.natsURL).
		Bool(logging.KeyEmbedded, a.opts.Embedded()).
		Str(logging.KeyDataDir, a.opts.DataDir).
		Str(logging.KeySpace, a.opts.Space).
		Str(logging.KeySync, a.syncString()).
		Int(logging.KeyReplicas, a.opts.Replicas).
		Str(logging.KeyDurable, a.opts.Durable).
		Uint64(logging.KeySeq, a.current().store.AppliedSeq()).
		Msg("ledger serving")
	close(a.ready)

	select {
	case <-ctx.Done():
	case <-a.stop:
	case <-failed:
	}
	a.log.Info().Msg("ledger shutting down")

	shCtx, cancel := context.WithTimeout(base, a.opts.ShutdownTimeout)
	defer cancel()
	var errs []error
	// 0. Cancel an online rebuild or verify in hand and wait for it (a
	// rebuild's swap, once begun, completes; a verify's request is
	// answered 503).
	a.stopOps()
	// 1. Stop accepting HTTP; requests in hand finish (bounded).
	if err := a.httpSrv.Shutdown(shCtx); err != nil {
		errs = append(errs, fmt.Errorf("app: http shutdown: %w", err))
		_ = a.httpSrv.Close()
	}
	<-httpDone
	// 2. Stop the submit service; requests in hand finish (bounded).
	if err := a.submit.Stop(shCtx); err != nil {
		errs = append(errs, fmt.Errorf("app: %w", err))
	}
	// 3, 4. Stop the log check, the expirer (it appends), then drain the
	// projector: it commits the batch in hand.
	stopCheck()
	<-checkDone
	<-scrubDone
	<-storageDone
	a.current().stop()
	a.stopProofs() // after the projector: the last batch gets its checkpoint
	_ = g.Wait()   // the HTTP goroutine's; every other has returned above; failures are in failErr
	// 5..7. Close the store, drain the connection, stop the server.
	relCtx, cancelRel := context.WithTimeout(base, a.opts.ShutdownTimeout)
	defer cancelRel()
	errs = append(errs, a.release(relCtx))
	select {
	case <-failed:
		errs = append([]error{failErr}, errs...)
	default:
	}
	if err := errors.Join(errs...); err != nil {
		a.log.Error().Err(err).Msg("ledger stopped with errors")
		return err
	}
	a.log.Info().Str(logging.KeyHTTPAddr, a.HTTPAddr()).Str(logging.KeyNATSURL, a.natsURL).Msg("ledger stopped")
	return nil
}

func (a *App) syncString() string {
	if !a.opts.Embedded() {
		return "server's"
	}
	return a.opts.SyncString()
}

// writeAddrFile writes <data>/serve.addr.json atomically.
func (a *App) writeAddrFile() error {
	addr := api.Addr{HTTP: a.HTTPAddr(), NATS: a.natsURL}
	if a.srv != nil {
		addr.NATSMonitor = a.srv.MonitorURL()
	}
	data, err := json.Marshal(addr)
	if err != nil {
		return fmt.Errorf("app: address file: %w", err)
	}
	path := a.opts.AddrFile()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".serve.addr.*")
	if err != nil {
		return fmt.Errorf("app: address file: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("app: address file: %w", err)
	}
	a.addrWrote = true
	return nil
}

// release closes what New acquired, in order, once: the HTTP listener, the
// appender, the store, the NATS connection (drained, bounded by ctx), the
// embedded server; removes the address file (when this process wrote it)
// and releases the data directory's lock.
func (a *App) release(ctx context.Context) error {
	a.closeOnce.Do(func() {
		var errs []error
		if a.httpSrv != nil {
			_ = a.httpSrv.Close()
		}
		a.closeMCP()
		if a.ln != nil {
			_ = a.ln.Close() // not Serve's yet when Run never served
		}
		if a.opsCancel != nil {
			a.opsCancel()
		}
		if a.asOf != nil {
			a.asOf.close()
		}
		if a.appender != nil {
			a.appender.Close()
		}
		if a.proofs != nil {
			if err := a.proofs.Close(); err != nil {
				errs = append(errs, fmt.Errorf("app: %w", err))
			}
		}
		if p := a.current(); p != nil {
			if err := p.store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("app: %w", err))
			}
		}
		if a.nc != nil {
			if err := a.nc.Drain(); err != nil {
				a.nc.Close()
			}
			select {
			case <-a.ncClosed:
			case <-ctx.Done():
				a.nc.Close()
				<-a.ncClosed
			}
		}
		if a.srv != nil {
			a.srv.Shutdown()
		}
		// Only the file this process wrote: never another's.
		if a.addrWrote {
			if err := os.Remove(a.opts.AddrFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("app: remove address file: %w", err))
			}
		}
		// Last: nothing of ours is left in <data>.
		if err := a.lock.Release(); err != nil {
			errs = append(errs, fmt.Errorf("app: %w", err))
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

// Close stops the ledger: when Run is serving, it asks Run to shut down
// and waits for it; otherwise it releases what New acquired. It is safe to
// call twice and concurrently, and returns the release error (Run's
// failures are Run's to return).
func (a *App) Close() error {
	a.stopOnce.Do(func() { close(a.stop) })
	a.mu.Lock()
	running := a.running
	a.mu.Unlock()
	if running {
		<-a.runDone
		return a.closeErr
	}
	return a.release(context.Background())
}
