// Package apiclient is the HTTP client of the ledger's own tools, for what
// they need beyond the public Go client (package
// github.com/mewledger/ledger/client, which the CLI uses for every read):
// the operations endpoints (online rebuild and verify, for `ledger
// rebuild` and `ledger verify --api`), reporting a bridge's gap, and
// appends answered in the wire's terms (the bridge's sink, the
// benchmarks). The submit service's NATS client is submit.Submitter; the
// read wrappers the tests use are in internal/testkit/apitest.
//
// It has no HTTP code of its own: every call goes through the public
// client's transport and error handling (its Do and typed methods), and
// its errors are converted here: an HTTP error answer is an *APIError
// (status plus the wire error); a server that cannot be reached is an
// error wrapping ErrUnreachable (the public client's sentinel), so callers
// can tell "the ledger said no" from "there is no ledger".
package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mewledger/ledger/api"
	pub "github.com/mewledger/ledger/client"
)

// DefaultAPI is the API address of a default `ledger serve`.
const DefaultAPI = pub.DefaultAPI

// Errors: the public client's, so errors.Is works across both.
var (
	// ErrUnreachable is wrapped when no server answered at all.
	ErrUnreachable = pub.ErrUnreachable
	// ErrOptions is wrapped by Options.Validate errors.
	ErrOptions = pub.ErrOptions
)

// APIError is an error answer of the API.
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Wire returns the error object as the API sent it.
func (e *APIError) Wire() *api.Error {
	return &api.Error{Code: e.Code, Message: e.Message, Field: e.Field}
}

// ConvertError converts the public client's *Error into an *APIError;
// any other error (nil included) is returned as is.
func ConvertError(err error) error {
	var pe *pub.Error
	if errors.As(err, &pe) {
		return &APIError{Status: pe.Status, Code: pe.Code, Message: pe.Message, Field: pe.Field}
	}
	return err
}

// Options configures a Client.
type Options struct {
	// API is the base URL. Default DefaultAPI.
	API string
	// HTTP is the HTTP client. Default one with a 60 s overall timeout.
	// The online operations (Verify) and streamed appends, which may take
	// longer, use its transport without the overall timeout: ctx bounds
	// them.
	HTTP *http.Client
	// Token, if set, is sent as "Authorization: Bearer <Token>" (the API's
	// tokens, contract §10).
	Token string
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	po := pub.Options{API: o.API, HTTP: o.HTTP, Token: o.Token}
	if err := po.Validate(); err != nil {
		return err
	}
	o.API, o.HTTP = po.API, po.HTTP
	return nil
}

// Client talks to one ledger's HTTP API through the public client. It is
// safe for concurrent use.
type Client struct {
	pc *pub.Client
}

// New returns a client.
func New(o Options) (*Client, error) {
	pc, err := pub.New(o.API, pub.WithHTTPClient(o.HTTP), pub.WithToken(o.Token))
	if err != nil {
		return nil, err
	}
	return &Client{pc: pc}, nil
}

// Public returns the public client this one is built on.
func (c *Client) Public() *pub.Client { return c.pc }

// API returns the base URL.
func (c *Client) API() string { return c.pc.API() }

// AppendResult converts a result of the public client's bulk append into
// the wire's per-line answer.
func AppendResult(r pub.Result) api.AppendResult {
	out := api.AppendResult{Line: r.Line, ID: r.Ack.ID, Seq: r.Ack.Seq, Duplicate: r.Ack.Duplicate}
	if r.Err != nil {
		out.Error = &api.Error{Code: r.Err.Code, Message: r.Err.Message, Field: r.Err.Field}
	}
	return out
}

// Publish appends one envelope (POST /v1/events). A refusal is an
// *APIError with status 400 or 413.
func (c *Client) Publish(ctx context.Context, space string, envelope []byte) (api.AppendResult, error) {
	a, err := c.pc.Append(ctx, envelope, pub.AppendOptions{Space: space})
	return api.AppendResult{ID: a.ID, Seq: a.Seq, Duplicate: a.Duplicate}, ConvertError(err)
}

// PublishStream appends the envelopes read from body (NDJSON, one per
// line) as one streamed POST and calls each with every answer, in order,
// as the ledger sends them back: the public client's AppendStream. The
// answers' line numbers are the body's (blank lines counted). An error
// from each stops reading the answers and ends the request.
func (c *Client) PublishStream(ctx context.Context, space string, kernel bool, body io.Reader, each func(api.AppendResult) error) error {
	return ConvertError(c.pc.AppendStream(ctx, body, func(r pub.Result) error {
		return each(AppendResult(r))
	}, pub.AppendOptions{Space: space, Kernel: kernel}))
}

// StartRebuild starts an online rebuild (POST /v1/ops/rebuild, role ops)
// and returns its status. Another operation running is an *APIError with
// status 409 (code busy).
func (c *Client) StartRebuild(ctx context.Context) (*api.RebuildStatus, error) {
	var st api.RebuildStatus
	if err := c.pc.Do(ctx, http.MethodPost, "/v1/ops/rebuild", nil, nil, "", false, &st); err != nil {
		return nil, ConvertError(err)
	}
	return &st, nil
}

// RebuildStatus returns the running or last online rebuild's status (GET
// /v1/ops/rebuild).
func (c *Client) RebuildStatus(ctx context.Context) (*api.RebuildStatus, error) {
	var st api.RebuildStatus
	if err := c.pc.Do(ctx, http.MethodGet, "/v1/ops/rebuild", nil, nil, "", false, &st); err != nil {
		return nil, ConvertError(err)
	}
	return &st, nil
}

// Verify runs an online verify (POST /v1/ops/verify, role ops): the live
// projection compared with a fold of the log. A difference is a result
// with OK false, not an error. It may take as long as a rebuild: ctx
// bounds it, not the client's timeout.
func (c *Client) Verify(ctx context.Context) (*api.VerifyResult, error) {
	var res api.VerifyResult
	if err := c.pc.Do(ctx, http.MethodPost, "/v1/ops/verify", nil, nil, "", true, &res); err != nil {
		return nil, ConvertError(err)
	}
	return &res, nil
}
