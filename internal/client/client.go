// Package client holds what the ledger's own tools need beyond the public
// Go client (package github.com/mewledger/ledger/client, which the CLI
// uses for every HTTP call): the operations endpoints (online rebuild and
// verify), reporting a bridge's gap, the submit service over NATS
// (Submitter), and the signatures the bridge, the benchmarks and the
// app's tests were written against, with the internal record and wire
// types.
//
// It has no HTTP code of its own: every call goes through the public
// client's transport and error handling (its Do and typed methods), and
// its errors are converted here: an HTTP error answer is an *APIError
// (status plus the wire error); a server that cannot be reached is an
// error wrapping ErrUnreachable (the public client's sentinel), so callers
// can tell "the ledger said no" from "there is no ledger".
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	pub "github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/model"
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
func (e *APIError) Wire() *wire.Error {
	return &wire.Error{Code: e.Code, Message: e.Message, Field: e.Field}
}

// apiErr converts the public client's *Error into an *APIError; any
// other error is returned as is.
func apiErr(err error) error {
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
	// tokens, SPEC §10).
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
	pc, err := pub.New(pub.Options{API: o.API, HTTP: o.HTTP, Token: o.Token})
	if err != nil {
		return nil, err
	}
	return &Client{pc: pc}, nil
}

// Public returns the public client this one is built on.
func (c *Client) Public() *pub.Client { return c.pc }

// API returns the base URL.
func (c *Client) API() string { return c.pc.API() }

// ReadOptions are the parameters every read takes.
type ReadOptions struct {
	Space  string // "" = the server's default space
	MinSeq uint64 // 0 = do not wait
	// AsOfSeq or AsOf ask for the state after that sequence, or at that
	// time, instead of the live projection's (not with MinSeq).
	AsOfSeq uint64
	AsOf    time.Time
}

func (r ReadOptions) public() *pub.ReadOptions {
	return &pub.ReadOptions{Space: r.Space, MinSeq: r.MinSeq, AsOfSeq: r.AsOfSeq, AsOf: r.AsOf}
}

// decode unmarshals an answer the public client returned as sent.
func decode(what string, raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	return nil
}

// Get returns a proposal and its JSON exactly as the API sent it.
func (c *Client) Get(ctx context.Context, id string, ro ReadOptions) (*model.Proposal, []byte, error) {
	raw, err := c.pc.GetRaw(ctx, id, ro.public())
	if err != nil {
		return nil, nil, apiErr(err)
	}
	var p model.Proposal
	if err := decode("proposal", raw, &p); err != nil {
		return nil, nil, err
	}
	return &p, raw, nil
}

// History returns a history and its JSON as sent.
func (c *Client) History(ctx context.Context, id string, ro ReadOptions) (*wire.History, []byte, error) {
	raw, err := c.pc.HistoryRaw(ctx, id, ro.public())
	if err != nil {
		return nil, nil, apiErr(err)
	}
	var h wire.History
	if err := decode("history", raw, &h); err != nil {
		return nil, nil, err
	}
	return &h, raw, nil
}

// ListFilter holds the list filters; empty fields do not filter.
type ListFilter struct {
	State, Proposer, Target, Anomaly string
	ActionType, ResourceType, Domain string
	Form                             string // one of the seeds' lifecycle forms (SPEC §2)
	Since, Until                     string // RFC 3339 or YYYY-MM-DD, passed as given
	Limit                            int
	Cursor                           string
}

// List returns one page of proposals and its JSON as sent.
func (c *Client) List(ctx context.Context, f ListFilter, ro ReadOptions) (*wire.List, []byte, error) {
	pf := pub.ListFilter{State: f.State, Proposer: f.Proposer, Target: f.Target, Anomaly: f.Anomaly,
		Since: f.Since, Until: f.Until, ActionType: f.ActionType, ResourceType: f.ResourceType, Domain: f.Domain,
		Form: f.Form, Limit: f.Limit}
	raw, err := c.pc.ListPageRaw(ctx, pf, f.Cursor, ro.public())
	if err != nil {
		return nil, nil, apiErr(err)
	}
	var l wire.List
	if err := decode("list", raw, &l); err != nil {
		return nil, nil, err
	}
	return &l, raw, nil
}

// Stats returns the statistics of a space and their JSON as sent.
func (c *Client) Stats(ctx context.Context, ro ReadOptions) (*model.Stats, []byte, error) {
	raw, err := c.pc.StatsRaw(ctx, ro.public())
	if err != nil {
		return nil, nil, apiErr(err)
	}
	st := model.NewStats()
	if err := decode("stats", raw, st); err != nil {
		return nil, nil, err
	}
	return st, raw, nil
}

// Status returns /v1/status.
func (c *Client) Status(ctx context.Context) (*wire.Status, error) {
	st, err := c.pc.Status(ctx)
	if err != nil {
		return nil, apiErr(err)
	}
	return &wire.Status{StreamSeq: st.StreamSeq, ProjectedSeq: st.ProjectedSeq, Lag: st.Lag, LogProblem: st.LogProblem}, nil
}

// AppendResult converts a result of the public client's bulk append into
// the wire's per-line answer.
func AppendResult(r pub.Result) wire.AppendResult {
	out := wire.AppendResult{Line: r.Line, ID: r.Ack.ID, Seq: r.Ack.Seq, Duplicate: r.Ack.Duplicate}
	if r.Err != nil {
		out.Error = &wire.Error{Code: r.Err.Code, Message: r.Err.Message, Field: r.Err.Field}
	}
	return out
}

// Publish appends one envelope (POST /v1/events). A refusal is an
// *APIError with status 400 or 413.
func (c *Client) Publish(ctx context.Context, space string, envelope []byte) (wire.AppendResult, error) {
	a, err := c.pc.Append(ctx, envelope, &pub.AppendOptions{Space: space})
	return wire.AppendResult{ID: a.ID, Seq: a.Seq, Duplicate: a.Duplicate}, apiErr(err)
}

// PublishKernel appends one bare kernel submission (a Proposal or
// KernelRequest object, POST /v1/events?kernel=1): the ledger wraps it in
// its kernel/proposal envelope. A refusal is an *APIError whose code is
// the V-PROP rule id.
func (c *Client) PublishKernel(ctx context.Context, space string, bare []byte) (wire.AppendResult, error) {
	a, err := c.pc.Append(ctx, bare, &pub.AppendOptions{Space: space, Kernel: true})
	return wire.AppendResult{ID: a.ID, Seq: a.Seq, Duplicate: a.Duplicate}, apiErr(err)
}

// PublishLines appends envelopes as one NDJSON POST and returns the
// per-line results, in order. The line numbers of the results are those
// the server saw (1-based positions in lines, blank lines counted).
func (c *Client) PublishLines(ctx context.Context, space string, lines [][]byte) ([]wire.AppendResult, error) {
	return c.publishLines(ctx, space, lines, false)
}

// PublishKernelLines is PublishLines for bare kernel submissions, one per
// line (?kernel=1).
func (c *Client) PublishKernelLines(ctx context.Context, space string, lines [][]byte) ([]wire.AppendResult, error) {
	return c.publishLines(ctx, space, lines, true)
}

func (c *Client) publishLines(ctx context.Context, space string, lines [][]byte, kernel bool) ([]wire.AppendResult, error) {
	var body bytes.Buffer
	for _, l := range lines {
		body.Write(l)
		body.WriteByte('\n')
	}
	var out []wire.AppendResult
	err := c.PublishStream(ctx, space, kernel, &body, func(r wire.AppendResult) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// PublishStream appends the envelopes read from body (NDJSON, one per
// line) as one streamed POST and calls each with every answer, in order,
// as the ledger sends them back: the public client's AppendStream. The
// answers' line numbers are the body's (blank lines counted). An error
// from each stops reading the answers and ends the request.
func (c *Client) PublishStream(ctx context.Context, space string, kernel bool, body io.Reader, each func(wire.AppendResult) error) error {
	return apiErr(c.pc.AppendStream(ctx, body, &pub.AppendOptions{Space: space, Kernel: kernel}, func(r pub.Result) error {
		return each(AppendResult(r))
	}))
}

// StartRebuild starts an online rebuild (POST /v1/ops/rebuild, role ops)
// and returns its status. Another operation running is an *APIError with
// status 409 (code busy).
func (c *Client) StartRebuild(ctx context.Context) (*wire.RebuildStatus, error) {
	var st wire.RebuildStatus
	if err := c.pc.Do(ctx, http.MethodPost, "/v1/ops/rebuild", nil, nil, "", false, &st); err != nil {
		return nil, apiErr(err)
	}
	return &st, nil
}

// RebuildStatus returns the running or last online rebuild's status (GET
// /v1/ops/rebuild).
func (c *Client) RebuildStatus(ctx context.Context) (*wire.RebuildStatus, error) {
	var st wire.RebuildStatus
	if err := c.pc.Do(ctx, http.MethodGet, "/v1/ops/rebuild", nil, nil, "", false, &st); err != nil {
		return nil, apiErr(err)
	}
	return &st, nil
}

// Verify runs an online verify (POST /v1/ops/verify, role ops): the live
// projection compared with a fold of the log. A difference is a result
// with OK false, not an error. It may take as long as a rebuild: ctx
// bounds it, not the client's timeout.
func (c *Client) Verify(ctx context.Context) (*wire.VerifyResult, error) {
	var res wire.VerifyResult
	if err := c.pc.Do(ctx, http.MethodPost, "/v1/ops/verify", nil, nil, "", true, &res); err != nil {
		return nil, apiErr(err)
	}
	return &res, nil
}
