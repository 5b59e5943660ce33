package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mewledger/ledger/api"
)

// Route is the path `ledger serve` mounts the streamable HTTP endpoint at.
const Route = "/mcp"

// DefaultSessionTimeout closes an HTTP session idle this long.
const DefaultSessionTimeout = 30 * time.Minute

// HTTPHandler serves a Server over streamable HTTP (MCP's transport for
// remote servers): POST for requests, GET for the server's stream of
// notifications, DELETE to end a session. It is a plain http.Handler, to
// be wrapped by whatever guards the route (authentication, connection
// budgets) and mounted at Route.
//
// Close ends every request in hand (the long GET streams included: an
// http.Server's Shutdown does not end them) and refuses new ones with 503;
// it does not close the Server. Safe to call twice.
type HTTPHandler struct {
	h        *sdk.StreamableHTTPHandler
	sessions *sessionTable
	ctx      context.Context
	cancel   context.CancelFunc
	once     sync.Once
}

// NewHTTPHandler returns the streamable HTTP handler of s, its sessions
// bound to their callers and capped (sessions.go).
func NewHTTPHandler(s *Server, o HTTPOptions) *HTTPHandler {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerCaller <= 0 {
		o.MaxSessionsPerCaller = min(DefaultMaxSessionsPerCaller, o.MaxSessions)
	}
	sessionTimeout := o.SessionTimeout
	ctx, cancel := context.WithCancel(context.Background())
	sessions := newSessionTable(o)
	s.mu.Lock()
	s.shareOf = sessions.shareOf
	s.mu.Unlock()
	return &HTTPHandler{
		sessions: sessions,
		h: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{
			SessionTimeout: sessionTimeout,
			// Handlers of the 2026-07-28 protocol run in the request's
			// context, which carries its Authorization (ServeHTTP).
			PropagateRequestCancellation: true,
			// The ledger's own middleware refuses foreign hosts and
			// cross-site requests for every route; the SDK's own check
			// stays on as well.
		}),
		ctx: ctx, cancel: cancel,
	}
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.ctx.Err() != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"shutting_down","message":"the ledger is shutting down"}}` + "\n"))
		return
	}
	ctx, cancel := context.WithCancel(WithAuthorization(r.Context(), r.Header.Get("Authorization")))
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()
	r = r.WithContext(ctx)
	if r.Method == http.MethodPost && !h.readBody(w, r) {
		return
	}
	h.serveOwned(w, r)
}

// MaxBody bounds the body of a POST to /mcp: one JSON-RPC message (or a
// batch) of a client of read-only tools is a few KiB.
const MaxBody = 1 << 20

// readBody reads r's body whole, up to MaxBody: over it, or declared over
// it, the request is answered 413 oversize with the limit (the server's
// refusal then closes the connection after a short linger, so the client
// reads it) and readBody returns false.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) bool {
	tooLarge := func() bool {
		writeErr(w, http.StatusRequestEntityTooLarge, api.CodeOversize, fmt.Sprintf("the MCP message is over the limit of %d bytes", MaxBody))
		return false
	}
	if r.ContentLength > MaxBody {
		return tooLarge()
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case err != nil:
		writeErr(w, http.StatusBadRequest, api.CodeBadRequest, "reading the body: "+err.Error())
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return true
}

// Close ends the requests in hand; see HTTPHandler.
func (h *HTTPHandler) Close() error {
	h.once.Do(h.cancel)
	return nil
}
