package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/lib/datalock"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/ledger"
)

func init() {
	register(&command{
		name:     "serve",
		synopsis: "serve [flags]",
		short:    "run the ledger: embedded NATS, projector, submit service, expirer, HTTP API",
		help: `Runs the whole ledger in this process. With no flags: an embedded NATS server
with JetStream (store in <data>/nats, fsync on every write) listening on
127.0.0.1:4222, the projection in <data>/projection, the submit service on
ledger.submit.<space>, the expirer, and the HTTP API on 127.0.0.1:8080.
With --nats-url it embeds nothing and uses the given servers.

Limits (contract §10): --max-envelope-bytes, --max-to and --max-correlation
apply to every append path (HTTP, NDJSON lines, submit service); a body
over the size limit is 413, too many to / correlation_id entries are 400
too_many with the field. Writes (POST /v1/events, POST /v1/ops/...) are rate
limited per client (the token's name, else the remote IP): over
--write-rate/--write-burst the API answers 429 with Retry-After; a negative
--write-rate turns the limit off. Without these flags: with --auth, a
token's own http.tokens[].write_limit, else http.write_limit, else 50/s
with bursts of 100; without --auth, no limit (all local clients would
share one budget).

Slow and idle clients (contract §10): a request's headers must arrive within
--http-header-timeout, its body must keep coming (--http-body-idle-timeout
per read) and be complete within --http-body-timeout; authentication comes
before any body is read, and a refused request's connection is closed at
once. At most --http-max-conns connections are open at once: when all are
taken the oldest idle one is closed to make room. Connections that have
not authenticated have a budget of their own (--http-anon-conns, and
--http-anon-per-ip per address; with --auth, closed after
--http-anon-idle-timeout idle), so they never take the slots of token holders. Long-lived requests
(/v1/watch, /mcp) are capped apart (--http-max-streams,
--http-streams-per-client): over a cap, 429 too_many_streams. The
descriptor limit (ulimit -n) must hold --http-max-conns plus 256 for NATS
and Pebble: an explicit --http-max-conns that does not fit stops the
start; the default is lowered to fit, with a warning.

Browsers (contract §10): a Host that is not the listen address, a loopback
name or an --http-host name is refused 421 (DNS rebinding); a POST from a
page of another origin (Origin, Sec-Fetch-Site) is refused 403; a POST body
must be application/json or NDJSON (415 otherwise). See docs/security.md.

<data> is locked (<data>/ledger.lock, holding the pid) before anything in
it is touched: a second serve, or an offline command, on the same
directory fails at once naming the holder. The LEDGER stream and the
projection are checked against each other at start and every
--log-check-interval: a deleted or recreated stream, lost history or a
checkpoint beyond the log stops the start, or while serving makes /readyz
503 with log_problem in /v1/status; the ledger's own stream settings
changed by someone else are put back and logged. The log checks itself:
a scrub re-reads the stream (a full pass at most every --scrub-period, at
most --scrub-rate messages a second; what was folded since the last look
every --checkpoint-interval) and compares every message's leaf with the
tree. A missing, altered or rewritten message makes /readyz 503, names
itself in /v1/status (log_problem, log_damage), stops signing at the last
good size and answers every proof that touches it 409 log_damaged; reads
go on, marked with a Ledger-Log-Damaged header. A message missing before
it was folded holds the projection at the last good sequence
(/v1/status projection_held) until it is back. Restoring the stream (a
snapshot, or ledger import of an export) while serving clears it with no
restart when it holds the same leaves up to the checkpoint
(docs/operations.md).

A retry is a duplicate for ever on every append path (contract §4): an
envelope the ledger already stored (same space, id and digest) is answered
"duplicate":true with the sequence it was first stored at, and not stored
again. Within --dup-window NATS recognises it; beyond it the projection
does, and when the projection is more than half the window behind the log
(a paused or stopped projector, a rebuild) the log's own per-subject index
answers for what it has not folded: appends never wait for the projection.
Every ledger on one stream must use the same --dup-window. See
docs/reliability.md.

Once serving it writes <data>/serve.addr.json ({"http":..,"nats":..}, the
actual addresses when a port is 0) and removes it on shutdown. SIGINT or
SIGTERM shuts down in order (HTTP, submit, expirer, projector commit, store,
NATS); a second signal exits at once.`,
		run: runServe,
	})
}

func runServe(ctx context.Context, e env, args []string) error {
	var (
		o                         app.Options
		natsURL, sync, logFormat  string
		logLevel                  string
		readyLag                  int
		authFile, tlsCert, tlsKey string
		limits                    limitFlags
		logCheck                  string
		cpInterval, scrubPeriod   string
		headerTO, bodyIdleTO      string
		bodyTO, dupWindow         string
		anonIdleTO, httpHosts     string
	)
	f := newFlags(commands["serve"], e)
	var bridgeConfig string // contract §14: bridges inside the server
	f.str(&bridgeConfig, "bridge-mew-config", "FILE", "", "record the MEW spaces this YAML file lists, with bridges inside the server (see ledger help bridge)", true)
	f.str(&o.DataDir, "data", "DIR", app.DefaultDataDir, "root of all local state", true)
	f.str(&o.HTTPAddr, "http", "ADDR", app.DefaultHTTPAddr, "HTTP API listen address (port 0: any free port)", true)
	f.str(&o.NATSListen, "nats-listen", "ADDR", app.DefaultNATSListen, "embedded NATS client address (port 0 or -1: any free port)", true)
	f.str(&o.NATSMonitor, "nats-monitor", "ADDR", "", "embedded NATS server's HTTP monitoring address (/varz, /jsz...: for nats-surveyor and the Prometheus NATS exporter; port 0: any free port; default off)", true)
	f.str(&natsURL, "nats-url", "URL[,URL...]", "", "use these NATS servers instead of embedding one", true)
	f.str(&o.Space, "space", "NAME", app.DefaultSpace, "default space", true)
	f.str(&logFormat, "log-format", "console|json", "", "log format (default: console on a terminal, else json)", true)
	f.str(&logLevel, "log-level", "LEVEL", "info", "log level: debug, info, warn, error", true)
	f.str(&sync, "sync-interval", "always|DURATION", "always", "embedded server fsync: always (before every ack) or an interval such as 1s, which risks losing acknowledged appends in a machine crash", true)
	f.integer(&o.Replicas, "replicas", "N", app.DefaultReplicas, "LEDGER stream replicas (3 on a cluster)", true)
	f.str(&dupWindow, "dup-window", "DURATION", app.DefaultDupWindow.String(), "the LEDGER stream's duplicate window: how long NATS itself remembers an append; the projection must fold within half of it or appends wait, then 503", true)
	f.str(&o.Durable, "durable", "NAME", app.DefaultDurable, "projector's durable consumer name (one per projection copy)", true)
	f.integer(&readyLag, "ready-lag", "EVENTS", app.DefaultReadyLag, "/readyz is 503 when the projection lags more events than this (0: must be caught up)", true)
	f.str(&headerTO, "http-header-timeout", "DURATION", app.DefaultReadHeaderTimeout.String(), "a request's headers must arrive within this", true)
	f.str(&bodyIdleTO, "http-body-idle-timeout", "DURATION", app.DefaultBodyIdleTimeout.String(), "a request body that sends nothing for this long is cut off", true)
	f.str(&bodyTO, "http-body-timeout", "DURATION", app.DefaultBodyTimeout.String(), "a request body must be complete within this", true)
	f.integer(&o.MaxConns, "http-max-conns", "N", app.DefaultMaxConns, fmt.Sprintf("most HTTP connections open at once; the oldest idle one is closed to make room (negative: no cap; the default is lowered to fit ulimit -n minus %d)", app.DescriptorReserve), true)
	f.integer(&o.AnonConns, "http-anon-conns", "N", 0, "most HTTP connections that have not authenticated (default: a quarter of --http-max-conns with --auth, else all)", true)
	f.integer(&o.AnonPerIP, "http-anon-per-ip", "N", 0, "most unauthenticated HTTP connections from one address (default: a quarter of --http-anon-conns with --auth, else all)", true)
	f.str(&anonIdleTO, "http-anon-idle-timeout", "DURATION", "", fmt.Sprintf("with --auth, an unauthenticated connection idle this long after a request is closed (default %v)", connbudget.DefaultAnonIdleTimeout), true)
	f.integer(&o.MaxStreams, "http-max-streams", "N", 0, fmt.Sprintf("most long-lived requests (/v1/watch, /mcp) open at once (default %d, at most a quarter of --http-max-conns)", connbudget.DefaultMaxStreams), true)
	f.integer(&o.StreamsPerClient, "http-streams-per-client", "N", 0, fmt.Sprintf("most long-lived requests of one client: a token, else an address with --auth, else a local program (its connection when /proc cannot name it) (default %d)", connbudget.DefaultStreamsPerClient), true)
	f.integer(&o.MaxHolds, "http-max-holds", "N", 0, "most requests waiting at once on their body or on a min_seq wait (default half of --http-max-conns)", true)
	f.integer(&o.HoldsPerClient, "http-holds-per-client", "N", 0, "of them, per client: a token, else an address with --auth, else a connection (default an eighth of --http-max-holds, at least --http-streams-per-client: a watch is a hold too)", true)
	f.str(&httpHosts, "http-host", "NAME[,NAME...]", "", "more names clients reach the API by, accepted as Host besides the listen address and loopback (DNS rebinding defence; * accepts any)", true)
	f.str(&logCheck, "log-check-interval", "DURATION", app.DefaultLogCheckInterval.String(), "how often the LEDGER stream and the projection are checked against each other while serving", true)
	f.str(&o.CheckpointKeyFile, "checkpoint-key", "FILE", "", "checkpoint signing key (default <data>/checkpoint.key, generated on first start; `ledger checkpoint key` prints its verifier key)", true)
	f.str(&o.CheckpointOrigin, "checkpoint-origin", "NAME", "", "the log's name in its checkpoints, for a key generated on first start (default <host>/ledger); an existing key must have this name", true)
	f.str(&cpInterval, "checkpoint-interval", "DURATION", proofs.DefaultInterval.String(), "shortest time between two signed checkpoints while the log grows", true)
	f.str(&scrubPeriod, "scrub-period", "DURATION", integrity.DefaultPeriod.String(), "the scrub re-reads the whole log and checks every leaf against the tree at most this often (messages folded since the last look are checked every --checkpoint-interval)", true)
	f.integer(&o.ScrubRate, "scrub-rate", "MSGS_PER_SECOND", integrity.DefaultRate, "most messages a second a full scrub pass reads (negative: no bound)", true)
	var witnesses []string
	f.list(&witnesses, "witness", "VKEY_URL", "a witness asked to cosign each checkpoint (C2SP tlog-witness): 'VKEY URL', its verifier key and base URL; repeat for each witness (in the environment: comma-separated)", true)
	f.integer(&o.WitnessQuorum, "witness-quorum", "N", 0, "how many witnesses must cosign a checkpoint for GET /v1/checkpoint to serve it (default: all)", true)
	f.str(&o.NATSConfigFile, "nats-config", "FILE", "", "nats-server configuration file for the embedded server (authorization, TLS)", true)
	f.str(&authFile, "auth", "FILE", "", "auth configuration (NATS users and permissions, API tokens and roles); see deploy/auth", true)
	f.str(&tlsCert, "tls-cert", "FILE", "", "serve the API over TLS with this certificate (PEM)", true)
	f.str(&tlsKey, "tls-key", "FILE", "", "the TLS certificate's key (PEM)", true)
	f.integer(&limits.maxBytes, "max-envelope-bytes", "BYTES", 0, fmt.Sprintf("largest envelope accepted on every append path (default and maximum %d)", ledger.MaxEnvelopeBytes), true)
	f.integer(&limits.maxTo, "max-to", "N", 0, fmt.Sprintf("most to entries of an envelope (default %d)", ledger.DefaultSubmitLimits().MaxTo), true)
	f.integer(&limits.maxCorrelation, "max-correlation", "N", 0, fmt.Sprintf("most correlation_id entries of an envelope (default %d)", ledger.DefaultSubmitLimits().MaxCorrelation), true)
	f.float(&limits.writeRate, "write-rate", "PER_SECOND", 0, fmt.Sprintf("HTTP writes a second per client, on average (default: --auth's http.write_limit, else %d; negative: no limit)", httpauth.DefaultWritesPerSecond), true)
	f.integer(&limits.writeBurst, "write-burst", "N", 0, fmt.Sprintf("HTTP writes a client may send at once above the rate (default: --auth's, else %d)", httpauth.DefaultWriteBurst), true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q", f.fs.Args())
	}
	var err error
	if o.SyncInterval, err = parseSync(sync); err != nil {
		return err
	}
	if o.Limits, err = limits.submitLimits(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		v    string
		p    *time.Duration
	}{
		{"log-check-interval", logCheck, &o.LogCheckInterval},
		{"checkpoint-interval", cpInterval, &o.CheckpointInterval},
		{"scrub-period", scrubPeriod, &o.ScrubPeriod},
		{"dup-window", dupWindow, &o.DupWindow},
		{"http-header-timeout", headerTO, &o.ReadHeaderTimeout},
		{"http-body-idle-timeout", bodyIdleTO, &o.BodyIdleTimeout},
		{"http-body-timeout", bodyTO, &o.BodyTimeout},
	} {
		if *d.p, err = time.ParseDuration(d.v); err != nil || *d.p <= 0 {
			return usageError("--%s %q: want a positive duration such as 5s", d.name, d.v)
		}
	}
	if anonIdleTO != "" {
		if o.AnonIdleTimeout, err = time.ParseDuration(anonIdleTO); err != nil || o.AnonIdleTimeout <= 0 {
			return usageError("--http-anon-idle-timeout %q: want a positive duration such as 2s", anonIdleTO)
		}
	}
	if f.source("http-max-conns") == "default" {
		o.MaxConns = 0 // the default: lowered to fit the descriptor limit
	}
	for _, w := range witnesses {
		p, err := witness.Parse(w)
		if err != nil {
			return usageError("%v", err)
		}
		o.Witnesses = append(o.Witnesses, p)
	}
	if o.WitnessQuorum < 0 || o.WitnessQuorum > len(o.Witnesses) {
		return usageError("--witness-quorum %d: want 1..%d (the number of --witness), or 0 for all", o.WitnessQuorum, len(o.Witnesses))
	}
	for _, h := range strings.Split(httpHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.HTTPHosts = append(o.HTTPHosts, h)
		}
	}
	for _, u := range strings.Split(natsURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			o.NATSURLs = append(o.NATSURLs, u)
		}
	}
	switch {
	case readyLag < 0:
		return usageError("--ready-lag %d: want ≥ 0", readyLag)
	case readyLag == 0:
		o.ReadyLag = app.NoLag
	default:
		o.ReadyLag = int64(readyLag)
	}
	log, err := logging.New(logging.Options{Format: logFormat, Level: logLevel, Out: e.stderr})
	if err != nil {
		return usageError("%v", err)
	}
	o.Logger = log
	if err := o.EnsureDefaults().Validate(); err != nil {
		return usageError("%v", err)
	}
	// <data> is ours before anything is written into it (--auth writes
	// the embedded server's configuration there).
	if o.DataLock, err = datalock.Acquire(o.DataDir); err != nil {
		log.Error().Err(err).Str(logging.KeyDataDir, o.DataDir).Msg("ledger cannot start")
		return errFailed
	}
	if err := applyAuth(&o, authFile, tlsCert, tlsKey, limits, log); err != nil {
		_ = o.DataLock.Release()
		return err
	}
	a, err := app.New(ctx, o)
	if err != nil {
		_ = o.DataLock.Release() // New released it unless it failed before taking it over
		log.Error().Err(err).Str(logging.KeyDataDir, o.DataDir).Msg("ledger cannot start")
		return errFailed
	}
	if bridgeConfig != "" {
		if err := serveBridges(ctx, a, bridgeConfig, log); err != nil {
			log.Error().Err(err).Msg("ledger stopped")
			return errFailed
		}
		return nil
	}
	if err := a.Run(ctx); err != nil {
		// Run has logged its failure and shutdown.
		return errFailed
	}
	return nil
}
