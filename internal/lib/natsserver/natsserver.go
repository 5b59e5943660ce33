// Package natsserver runs an embedded NATS server with JetStream for the
// ledger: the product's default single-process deployment (contract §11) and the
// tests' real server. It also runs the nodes of an in-process cluster.
//
// The defaults are the ledger's, not nats-server's: JetStream is always on,
// file writes are fsynced on every write unless the caller chooses an
// interval (contract §4), the client listener is on loopback, and max_payload
// leaves room for a 1 MiB envelope plus its headers.
package natsserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

const (
	// MaxEnvelope is the largest envelope the ledger accepts (contract §8).
	MaxEnvelope = 1 << 20
	// HeaderHeadroom is the room left above MaxEnvelope for the headers
	// the ledger and nats.go add (Nats-Msg-Id holds the space, the id of up
	// to 256 bytes and a 64-char digest; Nats-Expected-Stream, ...).
	HeaderHeadroom = 64 << 10
	// DefaultMaxPayload is the server's max_payload unless set: a 1 MiB
	// envelope plus headers must fit, and nats-server's own default is
	// exactly 1 MiB, which it would not. appendlog.DefaultMaxMsgSize is the
	// same number.
	DefaultMaxPayload = MaxEnvelope + HeaderHeadroom
	// DefaultHost is the client listen address unless set.
	DefaultHost = "127.0.0.1"
	// RandomPort asks for a free port picked by the OS.
	RandomPort = server.RANDOM_PORT
	// DefaultStartTimeout bounds Start when ctx has no deadline.
	DefaultStartTimeout = 30 * time.Second
)

// ErrOptions is returned (wrapped) by Start for invalid Options.
var ErrOptions = errors.New("natsserver: invalid options")

// Options configures an embedded server. The zero value of every field but
// StoreDir is a usable default.
type Options struct {
	// StoreDir is the JetStream store directory. Required.
	StoreDir string
	// Host and Port are the client listener. Host defaults to 127.0.0.1
	// (loopback only) unless the config file sets one; Port 0 means the
	// config file's port or nats-server's default 4222; RandomPort (-1)
	// picks a free port (see Server.ClientURL).
	Host string
	Port int
	// SyncAlways fsyncs every JetStream write before it is acknowledged;
	// SyncInterval fsyncs in the background every interval instead (an
	// acknowledged append may then be lost in a machine crash). When
	// neither is set and the config file sets neither, the server runs with
	// SyncAlways: the ledger's default (contract §4, "sync_interval: always").
	SyncInterval time.Duration
	SyncAlways   bool
	// ConfigFile is an optional nats-server configuration file
	// (authorization, accounts, TLS, ...). It is read first; every field
	// of these Options that is set overrides it. JetStream is always
	// enabled and the store directory is always StoreDir.
	ConfigFile string
	// ServerName names the server (required, and unique, in a cluster).
	ServerName string
	// ClusterName, ClusterHost, ClusterPort and Routes configure the
	// cluster listener and the routes to the other nodes. A cluster is
	// configured when ClusterName or ClusterPort is set; ClusterHost
	// defaults to 127.0.0.1. Routes are URLs such as
	// "nats-route://127.0.0.1:6222".
	ClusterName string
	ClusterHost string
	ClusterPort int
	Routes      []string
	// MonitorHost and MonitorPort are the server's HTTP monitoring
	// endpoint (/varz, /jsz, /healthz...: what nats-surveyor and the
	// Prometheus NATS exporter scrape). MonitorPort 0, the default, serves
	// none (unless the config file sets http); RandomPort picks a free port
	// (see Server.MonitorURL). MonitorHost defaults to 127.0.0.1.
	MonitorHost string
	MonitorPort int
	// Logger receives the server's logs (component=nats): warnings and
	// errors always; notices at info when Verbose; debug and trace lines
	// when Debug and Trace are set. The zero Logger discards everything.
	Logger zerolog.Logger
	// OnStoreError, if set, is called (on the server's goroutine: return
	// quickly) with each error the server logs about writing its
	// JetStream store: a full disk ("no space left on device"), a
	// critical write error. nats-server says so only in its log, and
	// keeps the stream's write error until JetStream restarts.
	OnStoreError func(msg string)
	Verbose      bool
	Debug        bool
	Trace        bool
	// MaxPayload is the largest message (headers included) clients may
	// publish. Default DefaultMaxPayload, unless the config file sets one.
	MaxPayload int32
}

// Validate reports whether o can be used to start a server.
func (o *Options) Validate() error {
	switch {
	case o.StoreDir == "":
		return fmt.Errorf("%w: StoreDir is required", ErrOptions)
	case o.SyncInterval < 0:
		return fmt.Errorf("%w: negative SyncInterval", ErrOptions)
	case o.SyncAlways && o.SyncInterval > 0:
		return fmt.Errorf("%w: SyncAlways and SyncInterval are exclusive", ErrOptions)
	case o.Port < RandomPort || o.Port > 65535:
		return fmt.Errorf("%w: Port %d out of range", ErrOptions, o.Port)
	case o.ClusterPort < RandomPort || o.ClusterPort > 65535:
		return fmt.Errorf("%w: ClusterPort %d out of range", ErrOptions, o.ClusterPort)
	case o.MonitorPort < RandomPort || o.MonitorPort > 65535:
		return fmt.Errorf("%w: MonitorPort %d out of range", ErrOptions, o.MonitorPort)
	case o.MaxPayload < 0:
		return fmt.Errorf("%w: negative MaxPayload", ErrOptions)
	case len(o.Routes) > 0 && o.ClusterName == "" && o.ClusterPort == 0:
		return fmt.Errorf("%w: Routes need a cluster listener (ClusterName or ClusterPort)", ErrOptions)
	}
	return nil
}

// serverOptions builds the nats-server options: config file first, then
// every field of o that is set.
func (o *Options) serverOptions() (*server.Options, error) {
	so := &server.Options{}
	if o.ConfigFile != "" {
		var err error
		if so, err = server.ProcessConfigFile(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("natsserver: config file %s: %w", o.ConfigFile, err)
		}
	}
	so.NoSigs = true // embedded: the process owns signal handling
	so.JetStream = true
	so.StoreDir = o.StoreDir
	if o.Host != "" {
		so.Host = o.Host
	} else if so.Host == "" {
		so.Host = DefaultHost
	}
	if o.Port != 0 {
		so.Port = o.Port
	}
	switch {
	case o.SyncAlways:
		so.SyncAlways, so.SyncInterval = true, 0
	case o.SyncInterval > 0:
		so.SyncAlways, so.SyncInterval = false, o.SyncInterval
	case !so.SyncAlways && so.SyncInterval == 0:
		so.SyncAlways = true
	}
	if o.MonitorPort != 0 {
		so.HTTPPort = o.MonitorPort
		if o.MonitorHost != "" {
			so.HTTPHost = o.MonitorHost
		} else {
			so.HTTPHost = DefaultHost
		}
	}
	if o.MaxPayload > 0 {
		so.MaxPayload = o.MaxPayload
	} else if so.MaxPayload == 0 {
		so.MaxPayload = DefaultMaxPayload
	}
	if o.ServerName != "" {
		so.ServerName = o.ServerName
	}
	if o.ClusterName != "" || o.ClusterPort != 0 {
		if o.ClusterName != "" {
			so.Cluster.Name = o.ClusterName
		}
		if o.ClusterHost != "" {
			so.Cluster.Host = o.ClusterHost
		} else if so.Cluster.Host == "" {
			so.Cluster.Host = DefaultHost
		}
		if o.ClusterPort != 0 {
			so.Cluster.Port = o.ClusterPort
		}
	}
	if len(o.Routes) > 0 {
		so.Routes = server.RoutesFromStr(strings.Join(o.Routes, ","))
	}
	return so, nil
}

// Server is a running embedded server. Its methods are safe for concurrent
// use. The caller owns it and must call Shutdown.
type Server struct {
	ns   *server.Server
	opts Options
	once sync.Once
}

// Start starts a server and waits until it accepts client connections and
// JetStream is enabled, or until ctx is done (DefaultStartTimeout when ctx
// has no deadline). On error nothing is left running. In a cluster, Start
// returns before the JetStream meta leader is elected: a node needs its
// peers for that (see natstest.StartCluster for waiting on it).
func Start(ctx context.Context, o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	so, err := o.serverOptions()
	if err != nil {
		return nil, err
	}
	ns, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	logger := &logAdapter{log: o.Logger.With().Str("component", "nats").Logger(), verbose: o.Verbose, fatal: make(chan string, 1), onStoreError: o.OnStoreError}
	ns.SetLoggerV2(logger, o.Debug, o.Trace, false)

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	s := &Server{ns: ns, opts: o}
	ns.Start()
	// A fatal error (a taken port: "Error listening on port") ends the
	// wait at once: the server will never be ready.
	if err := waitFor(ctx, logger.fatal, func() bool { return ns.ReadyForConnections(50 * time.Millisecond) }); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("natsserver: not ready for connections on %s:%d: %w", so.Host, so.Port, err)
	}
	if err := waitFor(ctx, logger.fatal, ns.JetStreamEnabled); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("natsserver: JetStream not enabled: %w", err)
	}
	return s, nil
}

// ErrFatal is returned (wrapped, with the server's message) when the
// server reports a fatal error while starting, e.g. a port in use.
var ErrFatal = errors.New("natsserver: fatal error")

// waitFor polls cond until it is true, the server reports a fatal error
// or ctx is done.
func waitFor(ctx context.Context, fatal <-chan string, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case msg := <-fatal:
			return fmt.Errorf("%w: %s", ErrFatal, msg)
		case <-t.C:
		}
	}
	return nil
}

// ClientURL is the URL clients connect to (nats://host:port), with the
// actual port when RandomPort was asked for.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// ClusterURL is the route URL other nodes use to reach this one
// (nats-route://host:port), or "" when no cluster listener is configured.
func (s *Server) ClusterURL() string {
	a := s.ns.ClusterAddr()
	if a == nil {
		return ""
	}
	return fmt.Sprintf("nats-route://%s", a.String())
}

// MonitorURL is the monitoring endpoint's base URL (http://host:port),
// with the actual port when RandomPort was asked for, or "" when the server
// serves none.
func (s *Server) MonitorURL() string {
	a := s.ns.MonitorAddr()
	if a == nil {
		return ""
	}
	return "http://" + a.String()
}

// Options returns the options the server was started with, e.g. to start
// it again on the same store after Shutdown.
func (s *Server) Options() Options { return s.opts }

// NatsServer returns the underlying server for what this package does not
// wrap (monitoring, JetStream state in tests). Do not shut it down
// directly; use Shutdown.
func (s *Server) NatsServer() *server.Server { return s.ns }

// Shutdown stops the server and waits until it has stopped and flushed its
// store. It is idempotent and safe to call concurrently.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}

// logAdapter routes nats-server logs to zerolog.
type logAdapter struct {
	log          zerolog.Logger
	verbose      bool
	fatal        chan string // the first fatal message (buffered, 1)
	onStoreError func(string)
}

// isStoreError reports whether a server error is about writing the store.
func isStoreError(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "no space left on device") || strings.Contains(m, "critical write error") ||
		strings.Contains(m, "out of resources") || strings.Contains(m, "disk quota exceeded")
}

var _ server.Logger = (*logAdapter)(nil)

func (l *logAdapter) Noticef(format string, v ...any) {
	if l.verbose {
		l.log.Info().Msgf(format, v...)
	}
}
func (l *logAdapter) Warnf(format string, v ...any) { l.log.Warn().Msgf(format, v...) }
func (l *logAdapter) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error().Msg(msg)
	if l.onStoreError != nil && isStoreError(msg) {
		l.onStoreError(msg)
	}
}

// Fatalf logs at error level and does not exit: the embedding process
// decides what a dead server means (Start returns an error).
func (l *logAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error().Bool("fatal", true).Msg(msg)
	select {
	case l.fatal <- msg:
	default:
	}
}
func (l *logAdapter) Debugf(format string, v ...any) { l.log.Debug().Msgf(format, v...) }
func (l *logAdapter) Tracef(format string, v ...any) { l.log.Trace().Msgf(format, v...) }

// ConfigHasAuth reports whether a nats-server configuration file sets up
// client authentication (users, nkeys, a token, accounts with users, or
// an auth callout). An empty path has none.
func ConfigHasAuth(configFile string) (bool, error) {
	if configFile == "" {
		return false, nil
	}
	so, err := server.ProcessConfigFile(configFile)
	if err != nil {
		return false, fmt.Errorf("natsserver: config file %s: %w", configFile, err)
	}
	return len(so.Users) > 0 || len(so.Nkeys) > 0 || so.Authorization != "" || so.Username != "" ||
		so.AuthCallout != nil || len(so.TrustedOperators) > 0, nil
}
