package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mewledger/ledger/client"
)

func init() {
	register(&command{
		name:     "health",
		synopsis: "health [--api URL] [--live] [--timeout D]",
		short:    "exit 0 if the ledger is ready (or, with --live, alive), else 1",
		help: "Asks the ledger's /readyz (ready: the projection caught up and serving), or\n" +
			"/healthz with --live (the process answers), and exits 0 on 200, 1 on\n" +
			"anything else or no answer: Docker's HEALTHCHECK and other probes. It says\n" +
			"nothing on success unless --verbose; on failure, one line on stderr.\n" +
			"Without --api (or LEDGER_API), it asks the port of LEDGER_HTTP on\n" +
			"127.0.0.1 when that is set (inside the ledger's container), else\n" +
			client.DefaultAPI + ".",
		run: runHealth,
	})
}

// defaultHealthTimeout bounds the probe: under Docker's own timeout (30s).
const defaultHealthTimeout = 5 * time.Second

func runHealth(ctx context.Context, e env, args []string) error {
	var (
		apiURL        string
		live, verbose bool
		timeout       time.Duration
	)
	f := newFlags(commands["health"], e)
	f.str(&apiURL, "api", "URL", client.DefaultAPI, "the ledger's HTTP API", true)
	f.boolean(&live, "live", false, "ask /healthz (alive) instead of /readyz (ready)", false)
	f.boolean(&verbose, "verbose", false, "print the answer on stdout", false)
	f.envDuration(&timeout, "timeout", "D", defaultHealthTimeout, "give up after D")
	if err := f.parseNone(args); err != nil {
		return err
	}
	if !f.given("api") && os.Getenv("LEDGER_API") == "" {
		if addr := os.Getenv("LEDGER_HTTP"); addr != "" {
			if _, port, err := net.SplitHostPort(addr); err == nil && port != "" && port != "0" {
				apiURL = "http://" + net.JoinHostPort("127.0.0.1", port)
			}
		}
	}
	if timeout <= 0 {
		return usageError("--timeout %v: want a positive duration", timeout)
	}
	path := "/readyz"
	if live {
		path = "/healthz"
	}
	u := strings.TrimRight(apiURL, "/") + path
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		return usageError("--api %q: want an http(s) URL such as %s", apiURL, client.DefaultAPI)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if isNATS(ctx, apiURL) {
			fmt.Fprintf(e.stderr, "ledger health: --api %s: that is a NATS server, not the ledger's HTTP API\n", apiURL)
		} else {
			fmt.Fprintf(e.stderr, "ledger health: %s: no answer: %v\n", u, err)
		}
		return errFailed // 1, never 2: Docker reserves exit status 2
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(e.stderr, "ledger health: %s: %s: %s\n", u, resp.Status, strings.TrimSpace(string(body)))
		return errFailed
	}
	if verbose {
		fmt.Fprintf(e.stdout, "%s\n", strings.TrimSpace(string(body)))
	}
	return nil
}
