package monitor

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api/evidence"
)

// Defaults of Options.
const (
	DefaultInterval    = 10 * time.Second
	DefaultParallel    = 4
	DefaultHTTPTimeout = time.Minute
)

// ErrOptions: the options are not valid.
var ErrOptions = errors.New("monitor: bad options")

// Options configure a Monitor.
type Options struct {
	// URL is the ledger's HTTP API base (http://host:port).
	URL string
	// VerifierKey is the ledger's checkpoint verifier key
	// (`ledger checkpoint key`).
	VerifierKey string
	// Witnesses, when it holds keys, are required: the monitor reads the
	// witnessed checkpoint (GET /v1/checkpoint) and refuses one without
	// the quorum. Without keys it reads the latest signed checkpoint
	// (?unwitnessed=1).
	Witnesses evidence.Witnesses
	// StateDir holds the verified copy and the accepted checkpoint.
	StateDir string
	// Token is an API bearer token (for a ledger started with --auth; it
	// needs the whole-log routes, so not one limited to spaces).
	Token string
	// Interval is the time between two checks of Run (default
	// DefaultInterval).
	Interval time.Duration
	// Parallel is how many entry bundles are fetched at once (default
	// DefaultParallel).
	Parallel int
	// HTTP is the client of every request (default: one with a
	// DefaultHTTPTimeout timeout).
	HTTP *http.Client
	// Logger receives the monitor's log.
	Logger zerolog.Logger
	// Registerer, if set, gets the monitor's metrics (Collector).
	Registerer prometheus.Registerer
}

// EnsureDefaults fills the zero fields with the defaults.
func (o *Options) EnsureDefaults() *Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	o.URL = strings.TrimRight(o.URL, "/")
	return o
}

// Validate checks the options (after EnsureDefaults). Errors wrap
// ErrOptions.
func (o *Options) Validate() error {
	u, err := url.Parse(o.URL)
	if o.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: URL %q: want http(s)://host[:port]", ErrOptions, o.URL)
	}
	if _, err := evidence.NewVerifier(o.VerifierKey); err != nil {
		return fmt.Errorf("%w: verifier key: %w", ErrOptions, err)
	}
	if o.StateDir == "" {
		return fmt.Errorf("%w: no state directory", ErrOptions)
	}
	if o.Parallel > 64 {
		return fmt.Errorf("%w: parallel %d: at most 64", ErrOptions, o.Parallel)
	}
	return nil
}
