package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/app"
	"github.com/mewledger/ledger/internal/authcfg"
	"github.com/mewledger/ledger/internal/httpauth"
	"github.com/mewledger/ledger/internal/logging"
)

// natsAuthFile is the nats-server configuration serve generates under
// --data from --auth for the embedded server.
const natsAuthFile = "nats-auth.conf"

// applyAuth sets the security options of o (SPEC §10) from serve's
// --auth, --tls-cert and --tls-key:
//
//   - --auth FILE (internal/authcfg): its NATS principals become the
//     embedded server's users and permissions (a generated
//     <data>/nats-auth.conf including --nats-config), the ledger connects
//     as its service user, and its HTTP tokens protect the API
//     (internal/httpauth: roles per route, write rate limit).
//   - --tls-cert/--tls-key: the API is served over TLS.
//
// Without --auth the API is open (loopback by default) and a warning is
// logged when it listens beyond loopback.
func applyAuth(o *app.Options, authFile, certFile, keyFile string, log zerolog.Logger) error {
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
		return nil
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
		if !cfg.DurableListed(o.Durable) {
			log.Warn().Str(logging.KeyDurable, o.Durable).
				Msg("the projector's durable is not in nats.service.durables of --auth: auditors are not kept away from it")
		}
	}
	guard, err := httpauth.New(cfg.HTTP)
	if err != nil {
		return usageError("--auth: %v", err)
	}
	httpauth.WarnIfExposed(o.HTTPAddr, guard.AuthEnabled(), log)
	httpauth.WarnIfCleartext(o.HTTPAddr, guard.AuthEnabled(), o.TLSConfig != nil, log)
	o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) {
		return guard.Protect(guard.Rules(), next)
	}
	return nil
}
