package main

import (
	"context"
	"io"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/mcp"
)

func init() {
	register(&command{
		name:     "mcp",
		synopsis: "mcp [--api URL] [--space S] [--max-wait D]",
		short:    "serve the Model Context Protocol over stdio, for MCP clients and mew bridge",
		help: `Serves the ledger's MCP server (docs/mcp.md) over stdin and stdout, against
the running ledger at --api: read-only tools (get_proposal, proposal_history,
list_proposals, stats, list_anomalies, list_gaps, list_events, get_event,
prove_proposal, wait_for_decision) and the
resources ledger://{space}/proposals/{id} with update notifications. A
desktop assistant or MEW's "mew bridge start --mcp-command ledger
--mcp-args mcp,..." starts it as a subprocess. Stdout carries the protocol
only; the "which ledger" line and warnings go to stderr. --space is the
space of calls that name none; --token (better: LEDGER_TOKEN) the bearer
token of a ledger started with --auth. The same server is mounted by
ledger serve at /mcp (streamable HTTP).`,
		run: runMCP,
	})
}

func runMCP(ctx context.Context, e env, args []string) error {
	var (
		c        clientOpts
		maxWait  time.Duration
		logLevel string
	)
	f := newFlags(commands["mcp"], e)
	addClientFlags(f, &c, false)
	f.duration(&maxWait, "max-wait", "D", mcp.DefaultMaxWait, "the longest wait_for_decision may wait")
	f.str(&logLevel, "log-level", "LEVEL", "warn", "stderr log level: debug, info, warn, error", false)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q", f.fs.Args())
	}
	if maxWait <= 0 {
		return usageError("--max-wait %v: want a positive duration", maxWait)
	}
	log, err := logging.New(logging.Options{Level: logLevel, Out: e.stderr})
	if err != nil {
		return usageError("%v", err)
	}
	cl, err := client.New(c.apiURL, client.WithToken(c.token), client.WithDefaultSpace(c.space))
	if err != nil {
		return usageError("%v", err)
	}
	c.announce(cl.API(), "api")
	s, err := mcp.New(mcp.Options{Client: cl, Space: c.space, MaxWait: maxWait, Logger: log,
		AuthHint: "the ledger needs a bearer token: give ledger mcp LEDGER_TOKEN or --token"})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}})
}

// nopWriteCloser: the protocol's writer is stdout, which the process
// closes itself.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
