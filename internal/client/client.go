// Package client is the Go client of the ledger's HTTP API (package api)
// and of its submit service, used by the CLI.
//
// Contract: every call takes ctx first; an HTTP error answer is returned
// as *APIError (status plus the wire error); a server that cannot be
// reached is an error wrapping ErrUnreachable, so callers can tell "the
// ledger said no" from "there is no ledger".
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/projections/model"
)

// DefaultAPI is the API address of a default `ledger serve`.
const DefaultAPI = "http://127.0.0.1:8080"

// Errors.
var (
	// ErrUnreachable is wrapped when no server answered at all.
	ErrUnreachable = errors.New("client: ledger unreachable")
	// ErrOptions is wrapped by Options.Validate errors.
	ErrOptions = errors.New("client: invalid options")
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

// Options configures a Client.
type Options struct {
	// API is the base URL. Default DefaultAPI.
	API string
	// HTTP is the HTTP client. Default one with a 60 s overall timeout.
	// The online operations (Rebuild, Verify), which may take longer,
	// use its transport without the overall timeout: ctx bounds them.
	HTTP *http.Client
	// Token, if set, is sent as "Authorization: Bearer <Token>" (the API's
	// tokens, SPEC §10).
	Token string
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.API == "" {
		o.API = DefaultAPI
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	u, err := url.Parse(o.API)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: API %q is not an http(s) URL such as %s", ErrOptions, o.API, DefaultAPI)
	}
	o.API = strings.TrimRight(o.API, "/")
	return nil
}

// Client talks to one ledger's HTTP API. It is safe for concurrent use.
type Client struct {
	opts Options
}

// New returns a client.
func New(o Options) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Client{opts: o}, nil
}

// API returns the base URL.
func (c *Client) API() string { return c.opts.API }

// ReadOptions are the parameters every read takes.
type ReadOptions struct {
	Space  string // "" = the server's default space
	MinSeq uint64 // 0 = do not wait
	// AsOfSeq or AsOf ask for the state after that sequence, or at that
	// time, instead of the live projection's (not with MinSeq).
	AsOfSeq uint64
	AsOf    time.Time
}

func (r ReadOptions) values() url.Values {
	v := url.Values{}
	if r.Space != "" {
		v.Set("space", r.Space)
	}
	if r.MinSeq > 0 {
		v.Set("min_seq", strconv.FormatUint(r.MinSeq, 10))
	}
	if r.AsOfSeq > 0 {
		v.Set("as_of_seq", strconv.FormatUint(r.AsOfSeq, 10))
	}
	if !r.AsOf.IsZero() {
		v.Set("as_of", r.AsOf.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// do sends a request and decodes a 2xx JSON answer into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string, out any) error {
	return c.doWith(ctx, c.opts.HTTP, method, path, q, body, contentType, out)
}

// long is the HTTP client of the long operations: the configured one
// without its overall timeout.
func (c *Client) long() *http.Client {
	hc := *c.opts.HTTP
	hc.Timeout = 0
	return &hc
}

func (c *Client) doWith(ctx context.Context, hc *http.Client, method, path string, q url.Values, body io.Reader, contentType string, out any) error {
	u := c.opts.API + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if isUnreachable(err) {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, c.opts.API, err)
		}
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("client: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var eb wire.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
		}
		return &APIError{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode),
			Message: fmt.Sprintf("unexpected answer from %s (is it a ledger?): %.200s", c.opts.API, data)}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: %s %s: answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// isUnreachable reports whether err means no server answered.
func isUnreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}

// Get returns a proposal and its JSON exactly as the API sent it.
func (c *Client) Get(ctx context.Context, id string, ro ReadOptions) (*model.Proposal, []byte, error) {
	var raw []byte
	if err := c.do(ctx, http.MethodGet, "/v1/proposals/"+url.PathEscape(id), ro.values(), nil, "", &raw); err != nil {
		return nil, nil, err
	}
	var p model.Proposal
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, fmt.Errorf("client: proposal: %w", err)
	}
	return &p, raw, nil
}

// History returns a history and its JSON as sent.
func (c *Client) History(ctx context.Context, id string, ro ReadOptions) (*wire.History, []byte, error) {
	var raw []byte
	if err := c.do(ctx, http.MethodGet, "/v1/proposals/"+url.PathEscape(id)+"/history", ro.values(), nil, "", &raw); err != nil {
		return nil, nil, err
	}
	var h wire.History
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, nil, fmt.Errorf("client: history: %w", err)
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
	q := ro.values()
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", f.State)
	set("proposer", f.Proposer)
	set("target", f.Target)
	set("anomaly", f.Anomaly)
	set("action_type", f.ActionType)
	set("resource_type", f.ResourceType)
	set("domain", f.Domain)
	set("form", f.Form)
	set("since", f.Since)
	set("until", f.Until)
	set("cursor", f.Cursor)
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var raw []byte
	if err := c.do(ctx, http.MethodGet, "/v1/proposals", q, nil, "", &raw); err != nil {
		return nil, nil, err
	}
	var l wire.List
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, nil, fmt.Errorf("client: list: %w", err)
	}
	return &l, raw, nil
}

// Stats returns the statistics of a space and their JSON as sent.
func (c *Client) Stats(ctx context.Context, ro ReadOptions) (*model.Stats, []byte, error) {
	var raw []byte
	if err := c.do(ctx, http.MethodGet, "/v1/stats", ro.values(), nil, "", &raw); err != nil {
		return nil, nil, err
	}
	st := model.NewStats()
	if err := json.Unmarshal(raw, st); err != nil {
		return nil, nil, fmt.Errorf("client: stats: %w", err)
	}
	return st, raw, nil
}

// Status returns /v1/status.
func (c *Client) Status(ctx context.Context) (*wire.Status, error) {
	var st wire.Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Publish appends one envelope (POST /v1/events). A refusal is an
// *APIError with status 400 or 413.
func (c *Client) Publish(ctx context.Context, space string, envelope []byte) (wire.AppendResult, error) {
	return c.publish(ctx, space, envelope, false)
}

// PublishKernel appends one bare kernel submission (a Proposal or
// KernelRequest object, POST /v1/events?kernel=1): the ledger wraps it in
// its kernel/proposal envelope. A refusal is an *APIError whose code is
// the V-PROP rule id.
func (c *Client) PublishKernel(ctx context.Context, space string, bare []byte) (wire.AppendResult, error) {
	return c.publish(ctx, space, bare, true)
}

func (c *Client) publish(ctx context.Context, space string, envelope []byte, kernel bool) (wire.AppendResult, error) {
	q := url.Values{}
	if space != "" {
		q.Set("space", space)
	}
	if kernel {
		q.Set("kernel", "1")
	}
	var r wire.AppendResult
	err := c.do(ctx, http.MethodPost, "/v1/events", q, bytes.NewReader(envelope), "application/json", &r)
	return r, err
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
	q := url.Values{}
	if space != "" {
		q.Set("space", space)
	}
	if kernel {
		q.Set("kernel", "1")
	}
	var body bytes.Buffer
	for _, l := range lines {
		body.Write(l)
		body.WriteByte('\n')
	}
	var raw []byte
	if err := c.do(ctx, http.MethodPost, "/v1/events", q, &body, "application/x-ndjson", &raw); err != nil {
		return nil, err
	}
	var out []wire.AppendResult
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var r wire.AppendResult
		if err := dec.Decode(&r); err != nil {
			return out, fmt.Errorf("client: NDJSON answer line %d: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// StartRebuild starts an online rebuild (POST /v1/ops/rebuild, role ops)
// and returns its status. Another operation running is an *APIError with
// status 409 (code busy).
func (c *Client) StartRebuild(ctx context.Context) (*wire.RebuildStatus, error) {
	var st wire.RebuildStatus
	if err := c.do(ctx, http.MethodPost, "/v1/ops/rebuild", nil, nil, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// RebuildStatus returns the running or last online rebuild's status (GET
// /v1/ops/rebuild).
func (c *Client) RebuildStatus(ctx context.Context) (*wire.RebuildStatus, error) {
	var st wire.RebuildStatus
	if err := c.do(ctx, http.MethodGet, "/v1/ops/rebuild", nil, nil, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Verify runs an online verify (POST /v1/ops/verify, role ops): the live
// projection compared with a fold of the log. A difference is a result
// with OK false, not an error. It may take as long as a rebuild: ctx
// bounds it, not the client's timeout.
func (c *Client) Verify(ctx context.Context) (*wire.VerifyResult, error) {
	var res wire.VerifyResult
	if err := c.doWith(ctx, c.long(), http.MethodPost, "/v1/ops/verify", nil, nil, "", &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// PublishStream appends the envelopes read from body (NDJSON, one per
// line) as one streamed POST and calls each with every answer, in order,
// as the ledger sends them back: the ledger reads, appends and answers
// line by line, so neither side holds the whole body. The answers' line
// numbers are the body's (blank lines counted). An error from each stops
// reading the answers and ends the request.
func (c *Client) PublishStream(ctx context.Context, space string, kernel bool, body io.Reader, each func(wire.AppendResult) error) error {
	q := url.Values{}
	if space != "" {
		q.Set("space", space)
	}
	if kernel {
		q.Set("kernel", "1")
	}
	u := c.opts.API + "/v1/events?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return fmt.Errorf("client: POST /v1/events: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.long().Do(req)
	if err != nil {
		if isUnreachable(err) {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, c.opts.API, err)
		}
		return fmt.Errorf("client: POST /v1/events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb wire.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
		}
		return &APIError{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode),
			Message: fmt.Sprintf("unexpected answer from %s (is it a ledger?): %.200s", c.opts.API, data)}
	}
	dec := json.NewDecoder(resp.Body)
	for n := 1; dec.More(); n++ {
		var r wire.AppendResult
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("client: NDJSON answer line %d: %w", n, err)
		}
		if err := each(r); err != nil {
			return err
		}
	}
	return nil
}
