// Package mcp is the ledger's Model Context Protocol server (contract §17):
// read-only tools over the audit queries, a wait for a proposal's decision
// built on the watch stream, and proposals as resources with update
// notifications. It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) and on the PUBLIC Go client
// (package client): every tool is an HTTP API call, so the same server runs
// in two places:
//
//   - `ledger mcp` serves it over stdio against a running ledger (Run with
//     an sdk.StdioTransport), with the CLI's client flags;
//   - `ledger serve` mounts it at /mcp (NewHTTPHandler, streamable HTTP),
//     its client calling the API's own handler in-process
//     (HandlerTransport) with the caller's own Authorization header, so
//     roles and space scopes are enforced by the API exactly as for a
//     direct request.
//
// Contract:
//   - Tools are read-only and bounded: each list has a default and a
//     maximum limit, and a result that holds less than there is says so
//     (truncated, next_cursor). Input and output JSON schemas are
//     advertised; outputs are structured content plus a short text.
//   - A refusal is a tool error (isError) whose text starts with the API's
//     error code: "not_found: ...", "forbidden: ...", "bad_query: ... (field
//     state)". Arguments the server checks itself are refused as
//     "bad_request: ... (field F)"; arguments that do not match the input
//     schema are refused by the SDK before any call.
//   - Resource subscriptions are served by one watch stream per space (and
//     caller token) with at least one subscription, owned by the Server:
//     Close cancels every watcher and waits for them. Close is safe twice.
//   - A Server is safe for concurrent use by any number of sessions.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/buildinfo"
	"github.com/mewledger/ledger/internal/lib/logging"
)

// Defaults and bounds of the tools' arguments.
const (
	DefaultListLimit    = 20
	MaxListLimit        = 200
	DefaultHistoryLimit = 200
	MaxHistoryLimit     = 1000
	// DefaultEventLimit and MaxEventLimit bound list_events' pages (the
	// API's own maximum is 1000: an event record with its entries is
	// about as large as a proposal, and a page goes into a model's
	// context).
	DefaultEventLimit = 50
	MaxEventLimit     = 200
	// MaxEventBytes bounds the original bytes get_event answers; a
	// larger message is cut there and says so (its sha256 is the whole
	// message's).
	MaxEventBytes = 256 << 10
	// MaxProofBytes bounds the evidence bundle prove_proposal embeds (a
	// larger one is refused, naming `ledger proof`); MaxProofEvents the
	// events its summary lists (the bundle holds all).
	MaxProofBytes  = 8 << 20
	MaxProofEvents = 200
	// DefaultWait is wait_for_decision's timeout when the call gives
	// none: under the 30 s after which MEW's bridge gives up on a request
	// (and the 60 s of the TypeScript SDK's clients).
	DefaultWait    = 25 * time.Second
	DefaultMaxWait = 10 * time.Minute
	// DefaultMaxSubscriptions bounds a server's resource subscriptions.
	DefaultMaxSubscriptions = 1024
	// DefaultMaxSubscriptionsPerCaller bounds one caller's (one
	// Authorization's) resource subscriptions.
	DefaultMaxSubscriptionsPerCaller = 64
)

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("mcp: invalid options")

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("mcp: server closed")

// Options configures a Server.
type Options struct {
	// Client is the ledger's API client the tools call. Required.
	Client *client.Client
	// Space is the space of calls that name none; "" is the client's (and
	// then the server's default). Used only to name resources.
	Space string
	// ForwardAuthorization forwards the Authorization header of the MCP
	// request (streamable HTTP) to the API calls it makes, through the
	// context (see HandlerTransport). Set by the /mcp mount.
	ForwardAuthorization bool
	// MaxWait bounds wait_for_decision's timeout. Default DefaultMaxWait.
	MaxWait time.Duration
	// MaxSubscriptions bounds the resource subscriptions held at once.
	// Default DefaultMaxSubscriptions.
	MaxSubscriptions int
	// MaxSubscriptionsPerCaller bounds one caller's (one Authorization
	// header's; in open mode every caller is one). Default
	// DefaultMaxSubscriptionsPerCaller.
	MaxSubscriptionsPerCaller int
	// WatchRetry is the pause before a watcher reconnects (the client's
	// WatchOptions.Retry). Default client.DefaultWatchRetry.
	WatchRetry time.Duration
	// AuthHint is added to the text of a refusal for a missing or unknown
	// token (401): how to give this server one.
	AuthHint string
	// Logger gets the watchers' and subscriptions' lines.
	Logger zerolog.Logger
}

// Validate fills in the defaults and checks the options.
func (o *Options) Validate() error {
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxSubscriptions == 0 {
		o.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if o.MaxSubscriptionsPerCaller == 0 {
		o.MaxSubscriptionsPerCaller = min(DefaultMaxSubscriptionsPerCaller, o.MaxSubscriptions)
	}
	if o.WatchRetry == 0 {
		o.WatchRetry = client.DefaultWatchRetry
	}
	switch {
	case o.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrOptions)
	case o.MaxWait < 0 || o.MaxSubscriptions < 0 || o.MaxSubscriptionsPerCaller < 0 || o.WatchRetry < 0:
		return fmt.Errorf("%w: negative MaxWait, MaxSubscriptions or WatchRetry", ErrOptions)
	}
	return nil
}

// Server is the ledger's MCP server. Create it with New; serve it with Run
// (stdio, or any SDK transport) or NewHTTPHandler; Close it.
type Server struct {
	opts Options
	c    *client.Client
	srv  *sdk.Server
	log  zerolog.Logger

	ctx    context.Context // cancelled by Close: every watcher's
	cancel context.CancelFunc
	wg     sync.WaitGroup // the watchers

	mu       sync.Mutex
	closed   bool
	watchers map[watchKey]*watcher
	subs     map[subKey]watchKey
	// shareOf names the share of a session's caller for the caps (set by
	// NewHTTPHandler: the local program in open mode); nil or "": the
	// session's Authorization.
	shareOf func(sessionID string) string
}

// New returns a Server with every tool and the proposal resource.
func New(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: o, c: o.Client, log: o.Logger.With().Str(logging.KeyComponent, "mcp").Logger(),
		watchers: map[watchKey]*watcher{}, subs: map[subKey]watchKey{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "ledger", Title: "Proposal ledger", Version: buildinfo.Get().Version}, &sdk.ServerOptions{
		Instructions: instructions,
		Capabilities: &sdk.ServerCapabilities{
			Tools:     &sdk.ToolCapabilities{},
			Resources: &sdk.ResourceCapabilities{Subscribe: true},
		},
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
	})
	for _, add := range tools {
		add(s)
	}
	s.addResources()
	return s, nil
}

// instructions are the server's instructions to a client (a model).
const instructions = `This server answers questions about a proposal ledger: the memory of a MEW space's proposals (risky operations an agent proposed, which a trusted participant fulfils, the proposer withdraws or anyone rejects). Every tool is read-only. Use get_proposal for one proposal's state and decider, proposal_history for every event filed under it with its effect, list_proposals to find proposals (by state, proposer, target, time, anomaly), list_anomalies for what an auditor must look at (fulfilments after a withdrawal, mismatches, ...), stats for counts, list_gaps for the recording gaps of bridges, list_events for the ledger's log itself (every stored event with its effect, filtered by sender, type, effect, anomaly, time, ...), get_event for one event's original bytes, prove_proposal for the evidence bundle of a proposal's history (each event with its inclusion proof against a checkpoint the ledger signed, for a third party to verify), and wait_for_decision to wait (without polling) until a pending proposal is fulfilled, withdrawn, rejected or expires. Proposals are also resources ledger://{space}/proposals/{id}: subscribe to be told when one changes.`

// SDK returns the underlying SDK server (to connect custom transports).
func (s *Server) SDK() *sdk.Server { return s.srv }

// Run serves one session over t (e.g. &sdk.StdioTransport{}) until the
// client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	err := s.srv.Run(ctx, t)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Close stops every watcher and waits for them. Sessions in hand end with
// their transports (the caller's). Safe to call twice.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// callerCtx is the context of an API call made for a request: with
// ForwardAuthorization, it carries the request's Authorization header
// (from the request's extra, or else from ctx, which the HTTP handler
// gave it); without, none.
//
// The in-process requests of a session name it as their remote address
// (WithCallerAddr), so that the API's per-caller shares (waiting
// requests, streams) count a caller without a token by its MCP session,
// not one "in-process" caller for every session.
func (s *Server) callerCtx(ctx context.Context, extra *sdk.RequestExtra, ss *sdk.ServerSession) context.Context {
	if ss != nil && ss.ID() != "" {
		ctx = WithCallerAddr(ctx, "mcp-session:"+ss.ID())
	}
	if !s.opts.ForwardAuthorization {
		return context.WithValue(ctx, authKey{}, "")
	}
	if extra != nil && extra.Header != nil && extra.Header.Get("Authorization") != "" {
		return WithAuthorization(ctx, extra.Header.Get("Authorization"))
	}
	return ctx
}

// argError is a refusal of an argument the server checks itself, shaped
// as the API's errors.
func argError(field, format string, args ...any) error {
	return &api.Error{Status: 400, Code: "bad_request", Field: field, Message: fmt.Sprintf(format, args...)}
}

// toolError is the error a tool answers for err: the API's refusal as
// "code: message (field f)", no ledger at all as "unreachable: ...".
func (s *Server) toolError(err error) error {
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Status == 401 && s.opts.AuthHint != "":
		return errors.New(ae.Error() + " (" + s.opts.AuthHint + ")")
	case errors.As(err, &ae):
		return errors.New(ae.Error())
	case errors.Is(err, client.ErrUnreachable):
		return fmt.Errorf("unreachable: no ledger answers (is ledger serve running?): %s", strings.TrimPrefix(err.Error(), client.ErrUnreachable.Error()+": "))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cancelled: %v", err)
	}
	return fmt.Errorf("internal: %v", err)
}

// schemaOpts infers output schemas: json.RawMessage (a proposal's params,
// a kernel's fields) is any JSON value, not an array of bytes. The schema
// has a description so that it is an object, not the boolean schema true,
// which some clients (the TypeScript SDK's) refuse.
var schemaOpts = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {Description: "any JSON value, as sent"},
}}

// schemaFor infers the JSON schema of T (a pointer: its element's).
func schemaFor[T any]() *jsonschema.Schema {
	rt := reflect.TypeFor[T]()
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	sc, err := jsonschema.ForType(rt, schemaOpts)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %v: %v", rt, err))
	}
	return sc
}

// toolHandler is a tool's body: it returns the structured output and a
// short text rendering of it, or an error (see toolError).
type toolHandler[In, Out any] func(ctx context.Context, in In) (Out, string, error)

// addTool adds a read-only tool with inferred input and output schemas.
func addTool[In, Out any](s *Server, name, title, description string, h toolHandler[In, Out]) {
	addToolContent(s, name, title, description, func(ctx context.Context, in In) (Out, []sdk.Content, error) {
		out, text, err := h(ctx, in)
		return out, []sdk.Content{&sdk.TextContent{Text: text}}, err
	})
}

// contentHandler is a tool's body that answers content blocks of its own
// (its text first, then e.g. an embedded resource) beside the structured
// output.
type contentHandler[In, Out any] func(ctx context.Context, in In) (Out, []sdk.Content, error)

// addToolContent adds a read-only tool whose result carries the content
// blocks h returns.
func addToolContent[In, Out any](s *Server, name, title, description string, h contentHandler[In, Out]) {
	no := false
	t := &sdk.Tool{
		Name:         name,
		Title:        title,
		Description:  description,
		OutputSchema: schemaFor[Out](),
		Annotations:  &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &no},
	}
	sdk.AddTool(s.srv, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		ctx = s.callerCtx(ctx, req.Extra, req.Session)
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			ctx = withProgress(ctx, req.Session, tok)
		}
		out, content, err := h(ctx, in)
		if err != nil {
			var zero Out
			return nil, zero, s.toolError(err)
		}
		return &sdk.CallToolResult{Content: content}, out, nil
	})
}

type progressKey struct{}

// progressState numbers a call's progress notifications.
type progressState struct {
	mu      sync.Mutex
	n       float64
	session *sdk.ServerSession
	token   any
}

// withProgress returns ctx carrying the progress token of a call.
func withProgress(ctx context.Context, ss *sdk.ServerSession, token any) context.Context {
	return context.WithValue(ctx, progressKey{}, &progressState{session: ss, token: token})
}

// progress sends a progress notification for the call of ctx, when its
// client asked for them (a progress token). A client may take it as a sign
// of life and extend its own timeout.
func progress(ctx context.Context, msg string) {
	p, ok := ctx.Value(progressKey{}).(*progressState)
	if !ok {
		return
	}
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	_ = p.session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: n, Message: msg})
}
