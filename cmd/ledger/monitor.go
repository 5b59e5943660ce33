package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/monitor"
)

func init() {
	register(&command{
		name:     "monitor",
		synopsis: "monitor --url URL --key KEY --state DIR [--witness-key W ...] [--witness-quorum N] [--once] [--interval D] [--metrics ADDR]",
		short:    "follow a ledger from outside, verify every entry, keep a verified copy",
		help: "Follows a ledger with its public routes only (contract §16): fetches its signed\n" +
			"checkpoint (with --witness-key, the witnessed one, refused without the quorum),\n" +
			"checks that it extends the last one accepted (a consistency proof built from the\n" +
			"hash tiles), downloads the new entry bundles, re-derives every leaf hash and the\n" +
			"root, decodes every leaf, and keeps a verified copy of the log in --state DIR\n" +
			"(DIR/log.jsonl, the export format: `ledger import -f DIR/log.jsonl` rebuilds a\n" +
			"ledger with the same tree root). A stopped monitor resumes where it was.\n" +
			"Findings (fork, rewritten, shrink, altered or missing entries, a checkpoint that\n" +
			"does not verify) name the sizes and the sequence; the accepted history is kept.\n" +
			"--once checks once, prints the result as JSON and exits 1 on a finding; without\n" +
			"it the monitor checks every --interval until stopped, logging findings, and\n" +
			"serves Prometheus metrics on --metrics ADDR (/metrics). The monitor does not\n" +
			"cosign (it is no tlog-witness): run a witness beside it. See docs/proofs.md.",
		run: runMonitor,
	})
}

// runMonitor is `ledger monitor` (internal/monitor).
func runMonitor(ctx context.Context, e env, args []string) error {
	var (
		o                   monitor.Options
		key                 string
		w                   witnessFlags
		once                bool
		metricsAddr         string
		logFormat, logLevel string
	)
	f := newFlags(commands["monitor"], e)
	f.str(&o.URL, "url", "URL", "", "the ledger's HTTP API (http://host:port)", true)
	f.str(&key, "key", "KEY", "", "the ledger's checkpoint verifier key (`ledger checkpoint key`), or a file holding it", true)
	f.str(&o.StateDir, "state", "DIR", "", "state directory: the verified copy (log.jsonl) and the accepted checkpoint", true)
	w.register(f, true)
	f.str(&o.Token, "token", "TOKEN", "", "bearer token for a ledger started with --auth (the whole-log routes: not a token limited to spaces)", true)
	f.hide("token")
	f.boolean(&once, "once", false, "check once, print the result as JSON, exit 1 on a finding", false)
	f.envDuration(&o.Interval, "interval", "DURATION", monitor.DefaultInterval, "time between two checks")
	f.integer(&o.Parallel, "parallel", "N", monitor.DefaultParallel, "entry bundles and tiles fetched at once", true)
	f.str(&metricsAddr, "metrics", "ADDR", "", "serve Prometheus metrics on ADDR (/metrics), without --once", true)
	f.str(&logFormat, "log-format", "console|json", "", "log format (default: console on a terminal, else json)", true)
	f.str(&logLevel, "log-level", "LEVEL", "info", "log level: debug, info, warn, error", true)
	if err := f.parseNone(args); err != nil {
		return err
	}
	if o.URL == "" || key == "" || o.StateDir == "" {
		return usageError("want --url URL --key KEY --state DIR")
	}
	if once && metricsAddr != "" {
		return usageError("--metrics goes with a long-running monitor, not --once")
	}
	var err error
	if key, err = verifierKeyArg(key); err != nil {
		return err
	}
	o.VerifierKey = key
	if o.Witnesses, err = w.witnesses(); err != nil {
		return err
	}
	log, err := logging.New(logging.Options{Format: logFormat, Level: logLevel, Out: e.stderr})
	if err != nil {
		return usageError("%v", err)
	}
	o.Logger = log
	reg := prometheus.NewRegistry()
	if metricsAddr != "" {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		o.Registerer = reg
	}
	m, err := monitor.Open(ctx, o)
	if errors.Is(err, monitor.ErrOptions) {
		return usageError("%v", err)
	}
	if err != nil {
		return err
	}
	defer m.Close()

	if once {
		res, err := m.Check(ctx)
		var fd *monitor.Finding
		switch {
		case errors.As(err, &fd):
			out := struct {
				OK       bool   `json:"ok"`
				Finding  string `json:"finding"`
				Accepted int64  `json:"accepted_size"`
				Size     int64  `json:"checkpoint_size"`
				Seq      uint64 `json:"seq,omitempty"`
				Error    string `json:"error"`
			}{false, monitor.KindName(fd.Kind), fd.Accepted, fd.Size, fd.Seq, fd.Error()}
			_ = writeOpsJSON(e.stdout, out)
			fmt.Fprintf(e.stderr, "ledger monitor: FINDING %s\n", fd)
			return errFailed
		case err != nil:
			return err
		}
		return writeOpsJSON(e.stdout, struct {
			OK           bool     `json:"ok"`
			Size         int64    `json:"size"`
			Root         string   `json:"root,omitempty"`
			Previous     int64    `json:"previous_size"`
			Entries      int64    `json:"entries_verified"`
			Cosigners    []string `json:"cosigners,omitempty"`
			NoCheckpoint bool     `json:"no_checkpoint,omitempty"`
			State        string   `json:"state"`
		}{true, res.Size, rootString(res), res.Previous, res.Entries, res.Cosigners, res.NoCheckpoint, o.StateDir})
	}

	if metricsAddr != "" {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", metricsAddr)
		if err != nil {
			return usageError("--metrics %s: %v", metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error().Err(err).Msg("monitor metrics server failed")
			}
		}()
		log.Info().Str(logging.KeyHTTPAddr, ln.Addr().String()).Msg("monitor serving /metrics")
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		}()
	}
	log.Info().Str("url", o.URL).Str("state", o.StateDir).Dur("interval", o.Interval).Msg("monitor following the ledger")
	return m.Run(ctx)
}

// rootString is a result's root, "" before any checkpoint.
func rootString(r monitor.Result) string {
	if r.Size == 0 && r.NoCheckpoint {
		return ""
	}
	return r.Root.String()
}
