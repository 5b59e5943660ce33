package app

import (
	"fmt"
	"net"
	"net/http"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/internal/server/mcp"
)

// The MCP endpoint (contract §17): the MCP server of package mcp, mounted on
// the API's mux at /mcp (POST, GET, DELETE: streamable HTTP), so it sits
// behind the same middleware as every route (its rule in httpauth's table
// needs the auditor role). Its tools call the API through a client whose
// transport serves requests from a.inner, the API's handler inside the
// middleware, forwarding the caller's Authorization header: each call is
// checked as the same request over the network would be, space scopes
// included. The handler is a plain http.Handler on the mux, so connection
// budgets that wrap routes wrap it too.

// MCP route patterns mounted on the API.
const (
	RouteMCPPost   = "POST " + mcp.Route
	RouteMCPGet    = "GET " + mcp.Route
	RouteMCPDelete = "DELETE " + mcp.Route
)

func (a *App) mountMCP() error {
	// The in-process requests name the API as a loopback client would
	// (whatever the listen address): a Host check passes loopback.
	_, port, err := net.SplitHostPort(a.ln.Addr().String())
	if err != nil {
		return fmt.Errorf("app: mcp client: %w", err)
	}
	cl, err := client.New("http://"+net.JoinHostPort("127.0.0.1", port),
		client.WithDefaultSpace(a.opts.Space),
		client.WithHTTPClient(&http.Client{Timeout: client.DefaultTimeout, Transport: &mcp.HandlerTransport{
			Handler: func() http.Handler { return a.inner },
		}}))
	if err != nil {
		return fmt.Errorf("app: mcp client: %w", err)
	}
	a.mcp, err = mcp.New(mcp.Options{Client: cl, Space: a.opts.Space, ForwardAuthorization: true,
		Logger: a.opts.Logger})
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	// Each session belongs to the caller that began it (its token; in
	// open mode its address: every local caller is trusted alike, and a
	// client may use its session over several connections). The caps
	// count a session against its token, or in open mode against the
	// local program that began it (connbudget.LocalProgram), so that
	// one local program cannot take every local caller's sessions.
	a.mcpHTTP = mcp.NewHTTPHandler(a.mcp, mcp.HTTPOptions{Caller: func(r *http.Request) string {
		if c := streamClient(r); c != "" {
			return c
		}
		return connbudget.AnonymousClient(r, true)
	}, Share: func(r *http.Request) string {
		if c := streamClient(r); c != "" {
			return c
		}
		return connbudget.LocalProgram(r, a.opts.HTTPAuthenticating)
	}, MaxSessions: a.opts.MCPMaxSessions, MaxSessionsPerCaller: a.opts.MCPSessionsPerCaller})
	for _, p := range []string{RouteMCPPost, RouteMCPGet, RouteMCPDelete} {
		a.api.Handle(p, a.mcpHTTP)
	}
	return nil
}

// MCP returns the MCP server mounted at /mcp (for tests and metrics).
func (a *App) MCP() *mcp.Server { return a.mcp }

// closeMCP ends the /mcp requests in hand and the MCP server's watchers.
// Safe to call twice, and when /mcp was never mounted.
func (a *App) closeMCP() {
	if a.mcpHTTP != nil {
		_ = a.mcpHTTP.Close()
	}
	if a.mcp != nil {
		_ = a.mcp.Close()
	}
}

// MCPHTTP returns the handler of /mcp (its sessions, for tests and
// metrics).
func (a *App) MCPHTTP() *mcp.HTTPHandler { return a.mcpHTTP }
