package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/ledger"
)

// natsAuthFile is the nats-server configuration serve generates under
// --data from --auth for the embedded server.
const natsAuthFile = "nats-auth.conf"

// applyAuth sets the security options of o (contract §10) from serve's
// --auth, --tls-cert and --tls-key:
//
//   - --auth FILE (internal/auth/authcfg): its NATS principals become the
//     embedded server's users and permissions (a generated
//     <data>/nats-auth.conf including --nats-config), the ledger connects
//     as its service user, and its HTTP tokens protect the API
//     (internal/auth/httpauth: roles per route, write rate limit).
//   - --tls-cert/--tls-key: the API is served over TLS.
//
// Without --auth the API is open (loopback by default) and a warning is
// logged when it (or the embedded NATS) listens beyond loopback, and the
// write rate limit is off unless --write-rate sets one (every local client
// would share the loopback address's budget). With --auth the limit
// applies per token (a token's own http.tokens[].write_limit, else
// http.write_limit, else the defaults; --write-rate/--write-burst override
// the file's), else per remote IP, on POST /v1/events and
// POST /v1/ops/... . Tokens with http.tokens[].spaces read and write only
// those spaces.
func applyAuth(o *app.Options, authFile, certFile, keyFile string, limits limitFlags, log zerolog.Logger) error {
	if (certFile == "") != (keyFile == "") {
		return usageError("--tls-cert and --tls-key go together")
	}
	if certFile != "" {
		tc, err := httpauth.TLSConfig(certFile, keyFile)
		if err != nil {
			return usageError("%v", err)
		}
		o.TLSConfig = tc
	}
	if authFile == "" {
		httpauth.WarnIfExposed(o.HTTPAddr, false, log)
		warnIfNATSExposed(*o, log)
		// No tokens: every local client would share one budget (the
		// loopback address). Off unless --write-rate asks for one.
		return protect(o, httpauth.Config{WriteLimit: httpauth.RateConfig{PerSecond: -1}}, limits, log)
	}
	cfg, err := authcfg.Load(authFile)
	if err != nil {
		return usageError("--auth: %v", err)
	}
	if cfg.NATSEnabled() {
		if o.Embedded() {
			if err := os.MkdirAll(o.DataDir, 0o750); err != nil {
				return fmt.Errorf("--auth: %w", err)
			}
			path := filepath.Join(o.DataDir, natsAuthFile)
			if err := cfg.WriteNATSConfig(path, o.NATSConfigFile); err != nil {
				return fmt.Errorf("--auth: %w", err)
			}
			o.NATSConfigFile = path
		}
		opts, err := cfg.ServiceConnectOptions()
		if err != nil {
			return usageError("--auth: %v", err)
		}
		o.NATSOptions = append(o.NATSOptions, opts...)
		o.Durables = append([]string{}, cfg.NATS.Service.Durables...)
		if !cfg.DurableListed(o.Durable) {
			log.Warn().Str(logging.KeyDurable, o.Durable).
				Msg("the projector's durable is not in nats.service.durables of --auth: auditors are not kept away from it")
		}
	}
	return protect(o, cfg.HTTP, limits, log)
}

// warnIfNATSExposed logs at error level when the embedded NATS server
// listens beyond loopback with no client authentication (neither --auth
// nor authorization in --nats-config): anyone who reaches the port may
// append as anyone, and delete or edit the LEDGER stream. It reports
// whether it warned.
func warnIfNATSExposed(o app.Options, log zerolog.Logger) bool {
	if !o.Embedded() || httpauth.IsLoopback(o.NATSListen) {
		return false
	}
	if has, err := natsserver.ConfigHasAuth(o.NATSConfigFile); err == nil && has {
		return false
	}
	log.Error().Str(logging.KeyNATSAddr, o.NATSListen).
		Msg("embedded NATS listens beyond loopback without authentication: anyone who can reach it can append as any sender, and delete or edit the LEDGER stream; use --auth (deploy/auth) or bind 127.0.0.1")
	return true
}

// PatternOpsPost are the POST routes of the online operations
// (/v1/ops/rebuild, /v1/ops/verify): role ops, like every route the
// default table does not name, and rate limited as writes.
const patternOpsPost = "POST /v1/ops/"

// protect sets the HTTP middleware: tokens and roles of cfg (none: open
// mode), and the write limit.
func protect(o *app.Options, cfg httpauth.Config, limits limitFlags, log zerolog.Logger) error {
	cfg.DefaultSpace = o.Space
	if cfg.DefaultSpace == "" { // not yet defaulted (app.Options.Validate does it later)
		cfg.DefaultSpace = app.DefaultSpace
	}
	if limits.writeRate != 0 {
		cfg.WriteLimit.PerSecond = limits.writeRate
	}
	if limits.writeBurst != 0 {
		cfg.WriteLimit.Burst = limits.writeBurst
	}
	guard, err := httpauth.New(cfg)
	if err != nil {
		return usageError("%v", err)
	}
	if guard.AuthEnabled() {
		httpauth.WarnIfExposed(o.HTTPAddr, true, log)
		httpauth.WarnIfCleartext(o.HTTPAddr, true, o.TLSConfig != nil, log)
	}
	o.HTTPAuthenticating = guard.AuthEnabled()
	rules := append(guard.Rules(), httpauth.Rule{Pattern: patternOpsPost, Roles: []httpauth.Role{httpauth.RoleOps}, Limit: true})
	o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) {
		return guard.Protect(rules, next)
	}
	return nil
}

// limitFlags are serve's limit flags (contract §10).
type limitFlags struct {
	maxBytes, maxTo, maxCorrelation int
	writeRate                       float64
	writeBurst                      int
}

// submitLimits checks the size and count limits.
func (l limitFlags) submitLimits() (ledger.SubmitLimits, error) {
	switch {
	case l.maxBytes < 0 || l.maxBytes > ledger.MaxEnvelopeBytes:
		return ledger.SubmitLimits{}, usageError("--max-envelope-bytes %d: want 1..%d (0: the default)", l.maxBytes, ledger.MaxEnvelopeBytes)
	case l.maxTo < 0:
		return ledger.SubmitLimits{}, usageError("--max-to %d: want ≥ 1 (0: the default)", l.maxTo)
	case l.maxCorrelation < 0:
		return ledger.SubmitLimits{}, usageError("--max-correlation %d: want ≥ 1 (0: the default)", l.maxCorrelation)
	case l.writeBurst < 0:
		return ledger.SubmitLimits{}, usageError("--write-burst %d: want ≥ 1 (0: the default)", l.writeBurst)
	}
	return ledger.SubmitLimits{MaxBytes: l.maxBytes, MaxTo: l.maxTo, MaxCorrelation: l.maxCorrelation}, nil
}
