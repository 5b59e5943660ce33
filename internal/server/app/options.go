package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/datalock"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// Defaults of Options (and of the `ledger serve` flags).
const (
	DefaultDataDir         = "./data"
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultNATSListen      = "127.0.0.1:4222"
	DefaultSpace           = ledger.DefaultSpace
	DefaultReplicas        = 1
	DefaultDupWindow       = appendlog.DefaultDuplicateWindow
	DefaultDurable         = projector.DefaultDurable
	DefaultReadyLag        = api.DefaultReadyLag
	DefaultMinSeqWait      = api.DefaultMinSeqWait
	DefaultShutdownTimeout = 15 * time.Second
	DefaultStartTimeout    = 60 * time.Second
)

// Paths under Options.DataDir.
const (
	NATSDirName       = "nats"
	ProjectionDirName = "projection"
	AddrFileName      = "serve.addr.json"
	TmpDirName        = "tmp"
	// CheckpointsDirName holds the checkpoint log (package proofs).
	CheckpointsDirName = proofs.LogDir
	// CheckpointKeyName is the default checkpoint signing key's file.
	CheckpointKeyName = proofs.KeyFile
)

// MinDupWindow is the shortest Options.DupWindow: the projection must
// fold within half of it for appends to go on (tests use a second or two).
const MinDupWindow = 100 * time.Millisecond

// DefaultRebuildSwapLag is Options.RebuildSwapLag's default.
const DefaultRebuildSwapLag = 1000

// NoLag as Options.ReadyLag means ready only when fully caught up.
const NoLag = api.NoLag

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("app: invalid options")

// Options configures a ledger. The zero value (plus a Logger) is the
// default single-process ledger of `ledger serve` with no flags.
type Options struct {
	// DataDir is the root of all local state: <DataDir>/nats (the
	// embedded server's JetStream store), <DataDir>/projection (Pebble)
	// and <DataDir>/serve.addr.json. Default ./data.
	DataDir string
	// HTTPAddr is the API's listen address; port 0 picks a free port
	// (see App.HTTPAddr and the addr file). Default 127.0.0.1:8080.
	HTTPAddr string
	// NATSListen is the embedded server's client address; port 0 or -1
	// picks a free port. Ignored with NATSURLs. Default 127.0.0.1:4222.
	NATSListen string
	// NATSURLs are existing NATS servers to use instead of embedding one.
	NATSURLs []string
	// Space is the default space. Default "default".
	Space string
	// SyncInterval is the embedded server's fsync interval; 0 (the
	// default) fsyncs every write before it is acknowledged
	// (sync_interval: always, contract §4).
	SyncInterval time.Duration
	// Replicas of the LEDGER stream. Default 1.
	Replicas int
	// DupWindow is the LEDGER stream's duplicate window: how long
	// JetStream itself remembers an appended envelope's Nats-Msg-Id.
	// Beyond it the projection answers a retry as a duplicate (contract §4,
	// docs/reliability.md), and the log's per-subject index for what the
	// projection has not folded yet. Default DefaultDupWindow (2m); at
	// least MinDupWindow.
	DupWindow time.Duration
	// Durable is the projector's consumer name. Default "projector".
	Durable string
	// ReadyLag is the most events the projection may lag and /readyz
	// still say ready; 0 means DefaultReadyLag, NoLag means none.
	ReadyLag int64
	// MinSeqWait bounds a read's min_seq wait. Default 5s.
	MinSeqWait time.Duration
	// MaxBatchBytes bounds one NDJSON POST body. Default 64 MiB.
	MaxBatchBytes int64
	// ShutdownTimeout bounds waiting for HTTP requests and submit
	// requests in hand at shutdown. Default 15s.
	ShutdownTimeout time.Duration
	// ExpiryInterval is the expirer's scan interval. Default the
	// expirer's (1s).
	ExpiryInterval time.Duration
	// ReadHeaderTimeout bounds the wait for a request's headers. Default
	// DefaultReadHeaderTimeout (10s).
	ReadHeaderTimeout time.Duration
	// BodyIdleTimeout bounds the wait for each read of a request body;
	// BodyTimeout bounds reading the whole body. A client that sends
	// nothing for BodyIdleTimeout, or is not done after BodyTimeout, is
	// cut off. Defaults DefaultBodyIdleTimeout (15s) and
	// DefaultBodyTimeout (5m).
	BodyIdleTimeout time.Duration
	BodyTimeout     time.Duration
	// MaxConns caps the HTTP connections open at once: when all are
	// taken, the oldest idle one is closed to make room, and only when
	// every one is in a request do more wait in the kernel's accept queue
	// (package connbudget). Default DefaultMaxConns (512), lowered with a
	// warning when the descriptor limit is too low for it (rlimit.go); set
	// explicitly, a limit too low for it stops the start. Negative: no cap
	// and no connection budget at all.
	MaxConns int
	// AnonConns caps the HTTP connections that have not authenticated;
	// AnonPerIP caps them per remote address; an anonymous connection
	// idle after a request is closed after AnonIdleTimeout (package
	// connbudget: the defaults depend on HTTPAuthenticating).
	AnonConns       int
	AnonPerIP       int
	AnonIdleTimeout time.Duration
	// MaxStreams caps the long-lived requests (/v1/watch, /mcp) open at
	// once, StreamsPerClient one client's (a token, else a remote
	// address with HTTPAuthenticating, else a local program or a
	// connection). Defaults connbudget.DefaultMaxStreams (or MaxConns/4 when
	// lower) and connbudget.DefaultStreamsPerClient.
	MaxStreams       int
	StreamsPerClient int
	// MaxHolds caps the requests waiting at once on a body or on a
	// server wait (min_seq), HoldsPerClient one caller's (a token, else
	// an address with HTTPAuthenticating, else a local program, or a
	// connection when its program is unknown). Defaults
	// MaxConns/2 and MaxHolds/8 (package connbudget, Holds).
	MaxHolds       int
	HoldsPerClient int
	// MCPMaxSessions caps the MCP sessions open at once,
	// MCPSessionsPerCaller one caller's (a token, else in open mode a
	// local program). Defaults mcp.DefaultMaxSessions and
	// mcp.DefaultMaxSessionsPerCaller.
	MCPMaxSessions       int
	MCPSessionsPerCaller int
	// DiskCheckInterval is how often the storage watch looks at the
	// embedded server's store; under DiskLowFree bytes free the disk is
	// full (appends refused, not ready); DiskResumeFree bytes free are
	// needed to resume (diskfull.go). Default DefaultDiskCheckInterval;
	// the free spaces default (0) to what the ledger needs to make
	// progress on its volume (diskbudget.go).
	DiskCheckInterval time.Duration
	DiskLowFree       int64
	DiskResumeFree    int64
	// HTTPHosts are the names (besides the listen address and loopback)
	// clients may send as Host; "*" accepts any (package origin).
	HTTPHosts []string
	// HTTPAuthenticating says HTTPMiddleware authenticates with tokens
	// (it calls connbudget.Authenticated): unauthenticated connections
	// then get the smaller budget. False: open mode.
	HTTPAuthenticating bool
	// maxConnsDefault: MaxConns was not set, so the descriptor check
	// may lower it (rlimit.go).
	maxConnsDefault bool
	// Durables, when not nil, are the only durable consumers allowed on
	// the LEDGER stream (with --auth: nats.service.durables, plus Durable):
	// any other durable consumer is deleted at each log check and the
	// deletion logged. NATS permissions cannot tell a durable consumer
	// from an ephemeral one, so auditors, who may read the log through
	// consumers, could otherwise leave durables behind for ever. nil (the
	// open mode) touches no consumer.
	Durables []string
	// LogCheckInterval is how often the log and the projection are checked
	// against each other while serving (logcheck.go). Default
	// DefaultLogCheckInterval.
	LogCheckInterval time.Duration
	// NATSMonitor is the embedded server's HTTP monitoring address
	// (host:port; port 0 picks a free one): /varz, /jsz and the rest, for
	// nats-surveyor and the Prometheus NATS exporter. "" (the default)
	// serves none. Only with the embedded server.
	NATSMonitor string
	// NATSConfigFile is an optional nats-server configuration file for the
	// embedded server (authorization, TLS, ...).
	NATSConfigFile string
	// NATSOptions are appended to the ledger's own NATS connection
	// options (credentials when the server requires authentication).
	NATSOptions []nats.Option
	// HTTPMiddleware, if set, wraps the API's handler (authentication,
	// rate limits: package httpauth). It is called once by New.
	HTTPMiddleware func(http.Handler) (http.Handler, error)
	// TLSConfig, if set, serves the API over TLS (httpauth.TLSConfig).
	TLSConfig *tls.Config
	// Limits are the submit limits of every append path (envelope size,
	// to and correlation_id entries); zero fields mean the defaults
	// (ledger.DefaultSubmitLimits). Limits.MaxBytes also bounds a
	// single-envelope HTTP body and each NDJSON line.
	Limits ledger.SubmitLimits
	// OnBatch, if set, is called after each batch the projector commits
	// (on its goroutine, after the metrics): the live projection is at
	// BatchInfo.LastSeq while it runs. For tests and instrumentation.
	OnBatch func(projections.BatchInfo)
	// RebuildSwapLag is how close (in events) an online rebuild's copy
	// must be to the end of the log before the projector is paused for
	// the swap. Default DefaultRebuildSwapLag.
	RebuildSwapLag int64
	// CheckpointKeyFile is the checkpoint signing key (contract §16); default
	// <DataDir>/checkpoint.key, generated there (mode 0600) on first start.
	// A file given here must exist.
	CheckpointKeyFile string
	// CheckpointOrigin names the log in its checkpoints: the name of a
	// key generated on first start (default proofs.DefaultOrigin(),
	// "<host>/ledger"), and, when set, what an existing key's name must be.
	CheckpointOrigin string
	// CheckpointInterval is the shortest time between two checkpoints.
	// Default proofs.DefaultInterval (1s).
	CheckpointInterval time.Duration
	// ScrubPeriod is the shortest time between the starts of two full
	// passes of the scrub (contract §16; default
	// integrity.DefaultPeriod, 24h); ScrubRate bounds a full pass in
	// messages a second (default integrity.DefaultRate; negative: no
	// bound). Messages folded since the last look are checked every
	// CheckpointInterval whatever the pass is doing.
	ScrubPeriod time.Duration
	ScrubRate   int
	// Witnesses are the witnesses asked to cosign each checkpoint (C2SP
	// tlog-witness; package witness); none: checkpoints are served
	// signed only. WitnessQuorum is how many must cosign a checkpoint for
	// GET /v1/checkpoint to serve it (0: all). WitnessBackoff, if set,
	// is the first wait before retrying a witness that failed (default
	// witness.DefaultMinBackoff).
	Witnesses      []witness.Witness
	WitnessQuorum  int
	WitnessBackoff time.Duration
	// DataLock, if set, is DataDir's lock already held by the caller
	// (serve takes it before writing its generated NATS configuration
	// there); New takes it over and the App releases it. Otherwise New
	// takes the lock itself.
	DataLock *datalock.Lock
	// Logger receives the start/stop/error lines of every component.
	Logger zerolog.Logger
}

// EnsureDefaults fills the zero fields with their defaults (and drops the
// blank NATS URLs), and returns o: o.EnsureDefaults().Validate(). It does
// not check anything (Validate does), as Pebble's Options split the two.
func (o *Options) EnsureDefaults() *Options {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&o.DataDir, DefaultDataDir)
	def(&o.HTTPAddr, DefaultHTTPAddr)
	def(&o.NATSListen, DefaultNATSListen)
	def(&o.Space, DefaultSpace)
	def(&o.Durable, DefaultDurable)
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas
	}
	if o.ReadyLag == 0 {
		o.ReadyLag = DefaultReadyLag
	}
	if o.DupWindow == 0 {
		o.DupWindow = DefaultDupWindow
	}
	if o.MinSeqWait == 0 {
		o.MinSeqWait = DefaultMinSeqWait
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.RebuildSwapLag == 0 {
		o.RebuildSwapLag = DefaultRebuildSwapLag
	}
	if o.LogCheckInterval == 0 {
		o.LogCheckInterval = DefaultLogCheckInterval
	}
	if o.ReadHeaderTimeout == 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.BodyIdleTimeout == 0 {
		o.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.DiskCheckInterval == 0 {
		o.DiskCheckInterval = DefaultDiskCheckInterval
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
		o.maxConnsDefault = true
	}
	if o.MaxStreams == 0 && o.MaxConns > 0 {
		o.MaxStreams = min(connbudget.DefaultMaxStreams, max(o.MaxConns/4, 1))
	}
	if o.MaxHolds == 0 && o.MaxConns > 0 {
		o.MaxHolds = max(o.MaxConns/2, 1)
	}
	// A watch is a hold too (issue 36 item 4): a caller's share of holds
	// is at least its share of streams, so that its watches meet the
	// streams cap first.
	if o.HoldsPerClient == 0 && o.MaxHolds > 0 {
		streams := o.StreamsPerClient
		if streams == 0 {
			streams = min(connbudget.DefaultStreamsPerClient, max(o.MaxStreams, 1))
		}
		o.HoldsPerClient = min(max(o.MaxHolds/8, 2, streams), o.MaxHolds)
	}
	var urls []string
	for _, u := range o.NATSURLs {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	o.NATSURLs = urls
	return o
}

// Validate checks the options, without changing them: call it after
// EnsureDefaults (New does both), since a zero field that has a default is
// out of range here (0 replicas, a duplicate window of 0).
func (o *Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.HTTPAddr); err != nil {
		return fmt.Errorf("%w: HTTP address %q: %w", ErrOptions, o.HTTPAddr, err)
	}
	if _, _, err := o.natsMonitorHostPort(); err != nil {
		return err
	}
	if o.NATSMonitor != "" && !o.Embedded() {
		return fmt.Errorf("%w: a NATS monitor address is for the embedded server (monitor external servers with their own http setting)", ErrOptions)
	}
	if _, _, err := o.natsHostPort(); err != nil {
		return err
	}
	switch {
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: negative sync interval", ErrOptions)
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("%w: replicas %d, want 1..5", ErrOptions, o.Replicas)
	case o.DupWindow < MinDupWindow:
		return fmt.Errorf("%w: duplicate window %v, want at least %v", ErrOptions, o.DupWindow, MinDupWindow)
	case o.ReadyLag < NoLag:
		return fmt.Errorf("%w: ready lag %d", ErrOptions, o.ReadyLag)
	case o.MaxBatchBytes < 0:
		return fmt.Errorf("%w: negative MaxBatchBytes", ErrOptions)
	case o.Limits.MaxBytes < 0 || o.Limits.MaxTo < 0 || o.Limits.MaxCorrelation < 0:
		return fmt.Errorf("%w: negative limit", ErrOptions)
	case o.Limits.MaxBytes > ledger.MaxEnvelopeBytes:
		return fmt.Errorf("%w: envelope limit %d is over the ledger's %d bytes", ErrOptions, o.Limits.MaxBytes, ledger.MaxEnvelopeBytes)
	case o.RebuildSwapLag < 0:
		return fmt.Errorf("%w: negative RebuildSwapLag", ErrOptions)
	case o.MinSeqWait < 0 || o.ShutdownTimeout < 0 || o.ExpiryInterval < 0 || o.LogCheckInterval < 0 || o.CheckpointInterval < 0 ||
		o.ReadHeaderTimeout < 0 || o.BodyIdleTimeout < 0 || o.BodyTimeout < 0:
		return fmt.Errorf("%w: negative duration", ErrOptions)
	case o.DiskCheckInterval < 0 || o.DiskResumeFree < 0 || o.DiskLowFree < 0 || (o.DiskResumeFree > 0 && o.DiskResumeFree < o.DiskLowFree):
		return fmt.Errorf("%w: disk check interval and free spaces must be positive, and DiskResumeFree at least DiskLowFree", ErrOptions)
	case o.AnonConns < 0 || o.AnonPerIP < 0 || o.AnonIdleTimeout < 0 || o.MaxStreams < 0 || o.StreamsPerClient < 0 ||
		o.MaxHolds < 0 || o.HoldsPerClient < 0 || o.MCPMaxSessions < 0 || o.MCPSessionsPerCaller < 0:
		return fmt.Errorf("%w: negative connection or stream cap", ErrOptions)
	case len(o.Space) > ledger.MaxSpaceBytes:
		return fmt.Errorf("%w: space is over %d bytes", ErrOptions, ledger.MaxSpaceBytes)
	case strings.ContainsAny(o.Durable, ". *>\t\r\n/\\"):
		return fmt.Errorf("%w: durable name %q must not contain '.', '*', '>', '/', '\\' or white space", ErrOptions, o.Durable)
	}
	return nil
}

// natsMonitorHostPort parses NATSMonitor: port 0 for 0 ("" ), else the
// port, with port 0 in the address meaning a free one.
func (o *Options) natsMonitorHostPort() (string, int, error) {
	if o.NATSMonitor == "" {
		return "", 0, nil
	}
	host, p, err := net.SplitHostPort(o.NATSMonitor)
	if err != nil {
		return "", 0, fmt.Errorf("%w: NATS monitor address %q: %w", ErrOptions, o.NATSMonitor, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%w: NATS monitor address %q: port must be 0..65535 (0: any free port)", ErrOptions, o.NATSMonitor)
	}
	if port == 0 {
		port = natsserver.RandomPort
	}
	return host, port, nil
}

// natsHostPort parses NATSListen; port 0 and -1 mean a free port.
func (o *Options) natsHostPort() (string, int, error) {
	host, p, err := net.SplitHostPort(o.NATSListen)
	if err != nil {
		return "", 0, fmt.Errorf("%w: NATS listen address %q: %w", ErrOptions, o.NATSListen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: NATS listen address %q: port must be 0..65535 (0 or -1: any free port)", ErrOptions, o.NATSListen)
	}
	if port <= 0 {
		port = natsserver.RandomPort
	}
	return host, port, nil
}

// Embedded reports whether the options run an embedded NATS server.
func (o Options) Embedded() bool { return len(o.NATSURLs) == 0 }

// NATSDir, ProjectionDir, AddrFile and TmpDir are the paths under
// DataDir. TmpDir holds the temporary projections of as-of reads and
// online verifies.
func (o Options) NATSDir() string       { return filepath.Join(o.DataDir, NATSDirName) }
func (o Options) ProjectionDir() string { return filepath.Join(o.DataDir, ProjectionDirName) }
func (o Options) AddrFile() string      { return filepath.Join(o.DataDir, AddrFileName) }
func (o Options) TmpDir() string        { return filepath.Join(o.DataDir, TmpDirName) }

// CheckpointsDir is the checkpoint log's directory under DataDir.
func (o Options) CheckpointsDir() string { return filepath.Join(o.DataDir, CheckpointsDirName) }

// CheckpointKey returns the signing key's path and whether it is the
// default one (generated when absent).
func (o Options) CheckpointKey() (string, bool) {
	if o.CheckpointKeyFile != "" {
		return o.CheckpointKeyFile, false
	}
	return filepath.Join(o.DataDir, CheckpointKeyName), true
}

// SyncString describes the fsync policy for logs.
func (o Options) SyncString() string {
	if o.SyncInterval == 0 {
		return "always"
	}
	return o.SyncInterval.String()
}
