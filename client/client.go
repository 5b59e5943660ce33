// Package client is the Go client of the proposal ledger's HTTP API, for
// agents and tools written outside this module:
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithDefaultSpace("team-a"))
//	ack, err := c.Append(ctx, envelope) // one envelope, durably stored
//	p, err := c.Get(ctx, "env-req-1", client.WithMinSeq(ack.Seq))
//	for p, err := range c.List(ctx, client.ListFilter{State: "pending"}) { ... }
//
// (Example, in example_test.go, is the same run against a real ledger.)
// Options are With… functions, as nats.go's: New takes Options (WithToken,
// WithDefaultSpace, WithHTTPClient), reads take ReadOptions (WithSpace,
// WithMinSeq, WithAsOfSeq, WithAsOf), appends AppendOptions (WithSpace,
// WithKernel).
//
// It depends on the ledger's record types (package model), its evidence
// package (client/evidence, for verified reads: WithVerifier and
// VerifiedGet, verify.go) and the standard library only: no NATS, no
// Pebble, no server code.
//
// Contract:
//   - Every call takes ctx first and is safe for concurrent use.
//   - An answer of the ledger that says no (a refused envelope, a proposal
//     not found, a missing role) is an *Error carrying the HTTP status and
//     the ledger's stable code and field; match it with errors.As, or with
//     errors.Is against ErrRefused, ErrNotFound, ErrUnauthorized,
//     ErrForbidden, ErrRateLimited and ErrUnavailable.
//   - No ledger answering at all is an error wrapping ErrUnreachable, so a
//     caller can tell "the ledger said no" from "there is no ledger".
//   - Appends are durable when acknowledged (the ledger's default), and
//     idempotent for ever: sending the same envelope (same space, id and
//     content) again, at any later time, is answered as a duplicate with
//     the sequence it was first stored at, and not stored again. While
//     the ledger's projection is far behind its log it cannot tell, and
//     answers 503 (ErrUnavailable): retry later.
package client

import (
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

	"github.com/mewledger/ledger/api/evidence"
)

// DefaultAPI is the address of a default `ledger serve`.
const DefaultAPI = "http://127.0.0.1:8080"

// DefaultTimeout bounds a call that is not streaming (see Options.HTTP).
const DefaultTimeout = 60 * time.Second

// Options is the configuration of a Client, which New fills from its
// arguments (the With… options). The zero value talks to DefaultAPI.
type Options struct {
	// API is the ledger's base URL. Default DefaultAPI.
	API string
	// Space is the space of every call that does not name one; "" is the
	// server's default space.
	Space string
	// Token, if set, is sent as "Authorization: Bearer <Token>" (a token
	// of the ledger's --auth file).
	Token string
	// HTTP is the HTTP client. Default: one whose calls time out after
	// DefaultTimeout, with NewTransport (a refusal sent while the body
	// was still being sent is returned, not the failed write). Streaming
	// calls (AppendStream, Watch) and Verify use its transport without
	// the overall timeout: ctx bounds them.
	HTTP *http.Client
	// verify is set by WithVerifier (VerifiedGet).
	verify    *verifyState
	witnesses evidence.Witnesses // WithWitnesses
}

// Validate fills in the defaults and checks the options. It returns an
// error wrapping ErrOptions.
func (o *Options) Validate() error {
	if o.API == "" {
		o.API = DefaultAPI
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: DefaultTimeout, Transport: NewTransport()}
	}
	u, err := url.Parse(o.API)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: API %q is not an http(s) URL such as %s", ErrOptions, o.API, DefaultAPI)
	}
	o.API = strings.TrimRight(o.API, "/")
	return nil
}

// Client talks to one ledger. Create it with New. It holds no goroutines
// and needs no closing.
type Client struct {
	opts Options
}

// Option sets a field of the Options of New, as nats.go's options do.
type Option func(*Options) error

// WithDefaultSpace sets Options.Space: the space of every call that does
// not name one with WithSpace.
func WithDefaultSpace(space string) Option {
	return func(o *Options) error { o.Space = space; return nil }
}

// WithToken sets Options.Token, the bearer token sent with every call
// ("" sends none).
func WithToken(token string) Option {
	return func(o *Options) error { o.Token = token; return nil }
}

// WithHTTPClient sets Options.HTTP (nil keeps the default).
func WithHTTPClient(hc *http.Client) Option {
	return func(o *Options) error { o.HTTP = hc; return nil }
}

// New returns a client of the ledger whose API is at api (""
// is DefaultAPI), configured by opts, or an error wrapping ErrOptions.
func New(api string, opts ...Option) (*Client, error) {
	o := Options{API: api}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Client{opts: o}, nil
}

// API returns the base URL the client talks to.
func (c *Client) API() string { return c.opts.API }

// ReadOptions are the parameters every read takes, set by its
// ReadOption arguments (WithSpace, WithMinSeq, WithAsOfSeq, WithAsOf).
// None reads the live projection of the client's space.
type ReadOptions struct {
	// Space overrides the client's space (WithSpace).
	Space string
	// MinSeq waits (bounded by the server, then an ErrUnavailable) until
	// the projection has folded this sequence: pass an Ack's Seq to read
	// your own write.
	MinSeq uint64
	// AsOfSeq or AsOf answer as of that point of the log instead of now.
	AsOfSeq uint64
	AsOf    time.Time
}

// spaceValues is a query naming the space of a call: space, or the
// client's Options.Space when it is empty, or none (the server's default).
func (c *Client) spaceValues(space string) url.Values {
	v := url.Values{}
	if space == "" {
		space = c.opts.Space
	}
	if space != "" {
		v.Set("space", space)
	}
	return v
}

// ReadOption is an option of a read: WithSpace, WithMinSeq, WithAsOfSeq,
// WithAsOf, or a ReadOptions value (its non-zero fields).
type ReadOption interface{ applyRead(*ReadOptions) }

// AppendOption is an option of an append: WithSpace, WithKernel, or an
// AppendOptions value (its non-zero fields).
type AppendOption interface{ applyAppend(*AppendOptions) }

// SpaceOption names the space of one call, overriding the client's; it is
// both a ReadOption and an AppendOption.
type SpaceOption string

// WithSpace names the space of one read or append ("" keeps the
// client's).
func WithSpace(space string) SpaceOption { return SpaceOption(space) }

func (s SpaceOption) applyRead(o *ReadOptions)     { o.Space = string(s) }
func (s SpaceOption) applyAppend(o *AppendOptions) { o.Space = string(s) }

// applyRead makes a ReadOptions value an option of its own: its non-zero
// fields set those of the read (for callers holding them in a struct).
func (r ReadOptions) applyRead(o *ReadOptions) {
	if r.Space != "" {
		o.Space = r.Space
	}
	if r.MinSeq != 0 {
		o.MinSeq = r.MinSeq
	}
	if r.AsOfSeq != 0 {
		o.AsOfSeq = r.AsOfSeq
	}
	if !r.AsOf.IsZero() {
		o.AsOf = r.AsOf
	}
}

type readOption func(*ReadOptions)

func (f readOption) applyRead(o *ReadOptions) { f(o) }

// WithMinSeq makes a read wait (bounded by the server, then an
// ErrUnavailable) until the projection has folded sequence seq: pass an
// Ack's Seq to read your own write.
func WithMinSeq(seq uint64) ReadOption {
	return readOption(func(o *ReadOptions) { o.MinSeq = seq })
}

// WithAsOfSeq answers a read as of sequence seq of the log instead of
// now.
func WithAsOfSeq(seq uint64) ReadOption {
	return readOption(func(o *ReadOptions) { o.AsOfSeq = seq })
}

// WithAsOf answers a read as of time t instead of now.
func WithAsOf(t time.Time) ReadOption {
	return readOption(func(o *ReadOptions) { o.AsOf = t })
}

// readOptions resolves opts; nil when there are none.
func readOptions(opts []ReadOption) *ReadOptions {
	if len(opts) == 0 {
		return nil
	}
	ro := &ReadOptions{}
	for _, o := range opts {
		if o != nil {
			o.applyRead(ro)
		}
	}
	return ro
}

func (c *Client) readValues(opts []ReadOption) url.Values {
	ro := readOptions(opts)
	var space string
	if ro != nil {
		space = ro.Space
	}
	v := c.spaceValues(space)
	if ro == nil {
		return v
	}
	if ro.MinSeq > 0 {
		v.Set("min_seq", strconv.FormatUint(ro.MinSeq, 10))
	}
	if ro.AsOfSeq > 0 {
		v.Set("as_of_seq", strconv.FormatUint(ro.AsOfSeq, 10))
	}
	if !ro.AsOf.IsZero() {
		v.Set("as_of", ro.AsOf.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// streaming is the HTTP client of calls ctx alone bounds.
func (c *Client) streaming() *http.Client {
	hc := *c.opts.HTTP
	hc.Timeout = 0
	return &hc
}

// send sends a request and returns the response of a 2xx answer; any
// other answer is read and returned as an *Error.
func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.opts.API + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(traced(ctx), method, u, body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if isUnreachable(err) {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, c.opts.API, err)
		}
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := errorFrom(resp.StatusCode, data, c.opts.API)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return nil, e
	}
	return resp, nil
}

// do sends a request and decodes a 2xx JSON answer into out (a *[]byte
// gets the bytes as sent).
func (c *Client) do(ctx context.Context, hc *http.Client, method, path string, q url.Values, body io.Reader, contentType string, out any) error {
	resp, err := c.send(ctx, hc, method, path, q, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("client: %s %s: read answer: %w", method, path, err)
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("client: %s %s: the answer is not the expected JSON: %w", method, path, err)
		}
	}
	return nil
}

// Do calls any route of the API, for the routes this package has no
// method for (the operations endpoints /v1/ops/..., POST /v1/gaps): path
// is the route from its leading slash, query its parameters (nil for
// none; the client's space is not added), body and contentType the
// request's ("" for none). A 2xx JSON answer is decoded into out: a
// *[]byte gets the bytes exactly as sent, nil discards them. Errors are
// those of every other call: an *Error for an answer that says no, an
// error wrapping ErrUnreachable when no ledger answers. With long set,
// ctx alone bounds the call (not Options.HTTP's timeout): for operations
// that may take as long as a rebuild.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string, long bool, out any) error {
	hc := c.opts.HTTP
	if long {
		hc = c.streaming()
	}
	return c.do(ctx, hc, method, path, query, body, contentType, out)
}

// isUnreachable reports whether err means no server answered.
func isUnreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns)
}
