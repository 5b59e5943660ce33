package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/app"
)

func init() {
	register(&command{
		name:     "bridge",
		synopsis: "bridge mew --gateway ws://HOST:PORT --mew-space ID --participant NAME --token-file FILE [--space S] [--api URL | --nats-url URL] [--history FILE] [--http ADDR]",
		short:    "record a live MEW space: join its gateway and append what it carries",
		help: `Records a live MEW space (contract §14). The bridge joins the space's gateway over
WebSocket as one more participant, exactly as MEW's own client does
({"type":"join","space":ID,"token":T,"participantId":NAME,"capabilities":[]}),
and appends every lifecycle envelope the gateway delivers, in receive order,
through the ledger's HTTP API (--api, default) or its submit service
(--nats-url). Everything else (system/*, capability/*, plain requests and
their responses, uncorrelated chat, #stream# frames) is counted by kind and
skipped; an envelope the ledger refuses is logged with its code and counted.

Declare the bridge in the MEW space's space.yaml as a participant with its
own token and "capabilities: []"; its participant id must be unique in the
space: whoever joins under it evicts the bridge. The MEW v0.11 gateway says
nothing to the evicted socket, so the bridge checks: every --probe-interval
it reads the gateway's participant list, and after --echo-after of silence
on its socket it sends itself one mcp/response (id ledger-echo:...; every
MEW token may send it) and expects it back: an eviction is noticed within
about 2 s whatever the impostor declares. A silent space costs one such
message a second (one "received" and one "delivered" line per participant
in the gateway's envelope-history.jsonl); a busy space none.

Under --auth the bridge needs one API token with the recorder role (for its
participant: the token's "bridges" list), and nothing else: it appends with
its Ledger-Bridge mark, reports its gaps (POST /v1/gaps) and reads its last
session (GET /v1/bridges?min_seq=latest). The ledger refuses a mark or a gap
from any other token (not_recorder), dated over a minute ahead of its clock
(clock_ahead), or starting after the log's end (gap_ahead).

When the connection drops (noticed at once: the socket's error or close,
an unanswered ping, a hostile gateway), or the bridge is evicted, it
reconnects with capped, jittered backoff and the ledger records a gap
(ledger/gap, GET /v1/gaps?space=, counted in /v1/stats) whose window starts
at the last envelope the ledger stored from the bridge: every lifecycle
envelope the ledger lacks lies inside a recorded gap. Stopping the bridge
(SIGINT, SIGTERM) records an open gap.

Appends carry the bridge's session (header Ledger-Bridge), from which the
ledger derives each bridge's sessions (GET /v1/bridges). A starting bridge
reads how its last session ended; if it died (SIGKILL, a lost machine, a
killed ledger) the gap from that session's last stored envelope is
recorded before anything new is appended (with --nats-url, give --api too:
the sessions are read there).

Envelopes are appended in receive order, in batches (--batch); those
received and not yet stored wait in a backlog bounded by --max-backlog-mib:
beyond it they are dropped, and the hole is a recorded gap.

With --history FILE --once the bridge reads FILE (a copied or rotated
gateway log) to its end, appends what the ledger lacks (what it has is
answered duplicate and not stored again), records its end as a gap and
exits: holes the file covers are healed later.

With --history FILE the bridge follows the gateway's own
.mew/logs/envelope-history.jsonl instead (new lines as they come, rotation
survived), and appends each delivered envelope under the sender of its
received record (the socket that really sent it): an envelope whose "from"
was forged is folded invalid (spoofed_sender). That needs --nats-url (a
direct publish under the sender's subject; under --auth, a user of the
auth file's nats.bridges list) or the bridge inside ledger serve
(--bridge-mew-config).

--http ADDR serves /healthz (200 while joined, else 503, with the state
and the reason; "status":"evicted" from the moment an eviction is noticed
until the bridge has joined again)
and /metrics (ledger_bridge_envelopes_total{bridge,kind,result},
ledger_bridge_state{bridge,state}, ledger_bridge_gaps_total{bridge},
ledger_bridge_echo_seconds{bridge}).`,
		run: runBridge,
	})
}

func runBridge(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || (args[0] != "mew" && !strings.HasPrefix(args[0], "-")) {
		return usageError("want `ledger bridge mew ...` (MEW is the only protocol bridged)")
	}
	if args[0] == "mew" {
		args = args[1:]
	}
	var (
		o                   bridge.Options
		tokenFile, natsURL  string
		httpAddr, logFormat string
		logLevel            string
		apiURL, apiToken    string
		creds               natsCreds
		quiet               bool
	)
	f := newFlags(commands["bridge"], e)
	f.str(&o.Gateway, "gateway", "URL", "", "the MEW gateway's WebSocket URL (ws://HOST:PORT)", true)
	f.str(&o.MEWSpace, "mew-space", "ID", "", "the MEW space id (space.id of its space.yaml)", true)
	f.str(&o.Participant, "participant", "NAME", "", "the bridge's participant id in the MEW space (unique there)", true)
	f.str(&tokenFile, "token-file", "FILE", "", "file holding the participant's MEW token", true)
	f.str(&o.Space, "space", "NAME", "", "ledger space the envelopes go to (default: the MEW space id)", true)
	f.str(&apiURL, "api", "URL", client.DefaultAPI, "the ledger's HTTP API", true)
	f.str(&apiToken, "token", "TOKEN", "", "API bearer token with the recorder role (for this participant), for a ledger started with --auth (prefer the environment variable)", true)
	f.hide("token")
	f.str(&natsURL, "nats-url", "URL", "", "append through the ledger's NATS submit service at these servers instead of the HTTP API", true)
	f.boolean(&quiet, "quiet", false, "do not say on stderr which ledger the bridge appends to", true)
	f.short("q", "quiet")
	creds.register(f)
	f.str(&o.HistoryFile, "history", "FILE", "", "follow the gateway's envelope-history.jsonl instead of joining (needs --nats-url)", true)
	f.boolean(&o.Once, "once", false, "with --history: read FILE to its end, append what the ledger lacks, record the end as a gap and exit (heal holes from a copied or rotated gateway log)", true)
	f.str(&httpAddr, "http", "ADDR", "", "serve /healthz and /metrics on this address", true)
	f.str(&logFormat, "log-format", "console|json", "", "log format (default: console on a terminal, else json)", true)
	f.str(&logLevel, "log-level", "LEVEL", "info", "log level: debug, info, warn, error", true)
	var probe, echoAfter, backoffMax string
	var backlogMiB, batch int
	f.str(&probe, "probe-interval", "DURATION", bridge.DefaultProbeInterval.String(), "how often the gateway is pinged and its participant list read to notice a dead socket or an eviction (0: never)", true)
	f.str(&echoAfter, "echo-after", "DURATION", bridge.DefaultEchoAfter.String(), "after this much silence on its socket the bridge sends itself a message through the gateway and takes a missing echo (within "+bridge.DefaultEchoTimeout.String()+") for an eviction (0: never)", true)
	f.str(&backoffMax, "backoff-max", "DURATION", bridge.DefaultBackoffMax.String(), "longest wait between reconnection attempts (from "+bridge.DefaultBackoffMin.String()+", doubling, jittered)", true)
	f.integer(&backlogMiB, "max-backlog-mib", "MIB", bridge.DefaultMaxBacklogBytes>>20, "bound of the envelopes received and not yet stored; beyond it envelopes are dropped and the hole recorded as a gap", true)
	f.integer(&batch, "batch", "N", bridge.DefaultBatchSize, "most envelopes one append request carries (1..1000)", true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q", f.fs.Args())
	}
	var err error
	if o.ProbeInterval, err = time.ParseDuration(probe); err != nil || o.ProbeInterval < 0 {
		return usageError("--probe-interval %q: want a duration such as 15s (0: never)", probe)
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = -1
	}
	if o.EchoAfter, err = time.ParseDuration(echoAfter); err != nil || o.EchoAfter < 0 {
		return usageError("--echo-after %q: want a duration such as 1s (0: never)", echoAfter)
	}
	if o.EchoAfter == 0 {
		o.EchoAfter = -1
	}
	if o.BackoffMax, err = time.ParseDuration(backoffMax); err != nil || o.BackoffMax < bridge.DefaultBackoffMin {
		return usageError("--backoff-max %q: want a duration of at least %v", backoffMax, bridge.DefaultBackoffMin)
	}
	if backlogMiB < 1 {
		return usageError("--max-backlog-mib %d: want at least 1", backlogMiB)
	}
	if batch < 1 || batch > 1000 {
		return usageError("--batch %d: want 1..1000", batch)
	}
	o.MaxBacklogBytes, o.BatchSize = backlogMiB<<20, batch
	switch {
	case o.HistoryFile == "" && o.Gateway == "":
		return usageError("--gateway is required (the MEW gateway's ws://HOST:PORT), unless --history is given")
	case o.MEWSpace == "":
		return usageError("--mew-space is required (space.id of the MEW space)")
	case o.Participant == "":
		return usageError("--participant is required (the bridge's id in the MEW space, declared in its space.yaml)")
	case o.HistoryFile == "" && tokenFile == "":
		return usageError("--token-file is required (the participant's MEW token)")
	case o.Once && o.HistoryFile == "":
		return usageError("--once reads a gateway log: give --history FILE")
	case o.HistoryFile != "" && natsURL == "":
		return usageError("--history publishes under each envelope's real sender, which the HTTP API cannot: give --nats-url, or run the bridge inside ledger serve (--bridge-mew-config)")
	case natsURL == "" && (creds.user != "" || creds.passwordFile != "" || creds.nkeyFile != ""):
		return usageError("--nats-user, --nats-password-file and --nats-nkey go with --nats-url (the API takes --token)")
	}
	if tokenFile != "" {
		if o.Token, err = bridge.ReadToken(tokenFile); err != nil {
			return usageError("--token-file: %v", err)
		}
	}
	log, err := logging.New(logging.Options{Format: logFormat, Level: logLevel, Out: e.stderr})
	if err != nil {
		return usageError("%v", err)
	}
	o.Logger = log

	if natsURL != "" {
		if !quiet {
			announce(e.stderr, natsURL, f.source("nats-url"))
		}
		nopts, err := creds.options()
		if err != nil {
			return err
		}
		nc, err := nats.Connect(natsURL, append([]nats.Option{nats.Name("ledger bridge mew"), nats.MaxReconnects(-1), nats.Timeout(5 * time.Second)}, nopts...)...)
		if err != nil {
			return unreachable("NATS", natsURL, err)
		}
		defer func() {
			if err := nc.Drain(); err != nil {
				nc.Close()
			}
		}()
		sink, err := bridge.NewNATSSink(nc)
		if err != nil {
			return err
		}
		defer sink.Close()
		if f.given("api") {
			// The submit service does not serve bridge sessions: read
			// them from the same ledger's HTTP API.
			hs, err := bridge.NewHTTPSink(apiURL, apiToken)
			if err != nil {
				return usageError("%v", err)
			}
			sink.Sessions = hs
		}
		o.Sink = sink
	} else {
		hs, err := bridge.NewHTTPSink(apiURL, apiToken)
		if err != nil {
			return usageError("%v", err)
		}
		if !quiet {
			announce(e.stderr, hs.Client.API(), f.source("api"))
		}
		o.Sink = hs
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.Metrics, err = bridge.NewMetrics(reg); err != nil {
		return err
	}
	b, err := bridge.New(o)
	if err != nil {
		return usageError("%v", err)
	}
	if httpAddr != "" {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", httpAddr)
		if err != nil {
			return usageError("--http %s: %v", httpAddr, err)
		}
		srv := &http.Server{Handler: bridge.Handler(b, reg), ReadHeaderTimeout: 10 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("bridge HTTP server failed")
			}
		}()
		log.Info().Str(logging.KeyHTTPAddr, ln.Addr().String()).Msg("bridge serving /healthz and /metrics")
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		}()
	}
	if err := b.Run(ctx); err != nil {
		return err
	}
	if o.Once {
		h := b.Health()
		fmt.Fprintf(e.stderr, "ledger bridge: %s read: %d frames, %d envelopes stored, %d already stored (duplicates), %d gaps recorded\n",
			o.HistoryFile, h.Frames, h.Appended, h.Duplicates, h.Gaps)
		if ctx.Err() != nil {
			return fmt.Errorf("ledger bridge: stopped before the end of %s", o.HistoryFile)
		}
	}
	return nil
}

// serveBridges runs `ledger serve` with the bridges of --bridge-mew-config
// inside it (contract §14): each appends through the ledger's own Appender
// (the same checks, dedup and group commit as every submit path) and its
// metrics are on the ledger's /metrics. The bridges start once the ledger
// serves and stop before it shuts down, so each records its open gap.
func serveBridges(ctx context.Context, a *app.App, configFile string, log zerolog.Logger) (err error) {
	started := false
	defer func() {
		if !started {
			_ = a.Close() // release what app.New acquired
		}
	}()
	cfg, err := bridge.LoadConfig(configFile)
	if err != nil {
		return err
	}
	m, err := bridge.NewMetrics(a.Metrics().Registry())
	if err != nil {
		return fmt.Errorf("bridge metrics: %w", err)
	}
	var bridges []*bridge.Bridge
	for i, bc := range cfg.Bridges {
		o, err := bc.Options()
		if err != nil {
			return err
		}
		sessions := bridge.StoreSessions{Store: a.Store, StreamSeq: bridge.StreamLastSeq(a.JetStream())}
		o.Sink, o.Metrics, o.Logger = bridge.AppenderSink{Appender: a.Appender(), Sessions: sessions}, m, log
		b, err := bridge.New(o)
		if err != nil {
			return fmt.Errorf("%s: bridges[%d]: %w", configFile, i, err)
		}
		bridges = append(bridges, b)
	}

	started = true
	appCtx, stopApp := context.WithCancel(context.WithoutCancel(ctx))
	defer stopApp()
	bctx, stopBridges := context.WithCancel(ctx)
	defer stopBridges()
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(appCtx) }()
	select {
	case <-a.Ready():
		for _, b := range bridges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.Run(bctx); err != nil { // nil when bctx ends
					log.Error().Err(err).Msg("a bridge stopped; the ledger goes on without it")
				}
			}()
		}
	case err := <-runErr:
		return err
	}
	select {
	case <-ctx.Done(): // a signal: bridges first, then the ledger
		stopBridges()
		wg.Wait()
		stopApp()
		return <-runErr
	case err := <-runErr: // the ledger stopped on its own
		stopBridges()
		wg.Wait()
		return err
	}
}
