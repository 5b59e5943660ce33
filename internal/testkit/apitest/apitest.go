// Package apitest is a client of the ledger's HTTP API for tests: the
// reads (Get, History, List, Stats, Status, Gaps) and publishes (one
// bare kernel submission, NDJSON lines) answered in the internal record
// and contract types, on top of client.Client. No production code uses it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

// Client is a client.Client with the tests' reads and publishes. It
// is safe for concurrent use.
type Client struct {
	*client.Client
}

// New returns a client.
func New(o client.Options) (*Client, error) {
	c, err := client.New(o.API, client.WithToken(o.Token), client.WithHTTPClient(o.HTTP), client.WithDefaultSpace(o.Space))
	if err != nil {
		return nil, err
	}
	return &Client{Client: c}, nil
}

// ReadOptions are the parameters every read takes.
type ReadOptions struct {
	Space  string // "" = the server's default space
	MinSeq uint64 // 0 = do not wait
	// AsOfSeq or AsOf ask for the state after that sequence, or at that
	// time, instead of the live projection's (not with MinSeq).
	AsOfSeq uint64
	AsOf    time.Time
}

func (r ReadOptions) public() client.ReadOptions {
	return client.ReadOptions{Space: r.Space, MinSeq: r.MinSeq, AsOfSeq: r.AsOfSeq, AsOf: r.AsOf}
}

// decode unmarshals an answer the public client returned as sent.
func decode(what string, raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("apitest: %s: %w", what, err)
	}
	return nil
}

// Get returns a proposal and its JSON exactly as the API sent it.
func (c *Client) Get(ctx context.Context, id string, ro ReadOptions) (*api.Proposal, []byte, error) {
	raw, err := c.Client.GetRaw(ctx, id, ro.public())
	if err != nil {
		return nil, nil, err
	}
	var p api.Proposal
	if err := decode("proposal", raw, &p); err != nil {
		return nil, nil, err
	}
	return &p, raw, nil
}

// History returns a history and its JSON as sent.
func (c *Client) History(ctx context.Context, id string, ro ReadOptions) (*api.History, []byte, error) {
	raw, err := c.Client.HistoryRaw(ctx, id, ro.public())
	if err != nil {
		return nil, nil, err
	}
	var h api.History
	if err := decode("history", raw, &h); err != nil {
		return nil, nil, err
	}
	return &h, raw, nil
}

// ListFilter holds the list filters; empty fields do not filter.
type ListFilter struct {
	State, Proposer, Target, Anomaly string
	ActionType, ResourceType, Domain string
	Form                             string // one of the seeds' lifecycle forms (contract §2)
	Since, Until                     string // RFC 3339 or YYYY-MM-DD, passed as given
	Limit                            int
	Cursor                           string
}

// List returns one page of proposals and its JSON as sent.
func (c *Client) List(ctx context.Context, f ListFilter, ro ReadOptions) (*api.List, []byte, error) {
	pf := client.ListFilter{State: f.State, Proposer: f.Proposer, Target: f.Target, Anomaly: f.Anomaly,
		Since: f.Since, Until: f.Until, ActionType: f.ActionType, ResourceType: f.ResourceType, Domain: f.Domain,
		Form: f.Form, Limit: f.Limit}
	raw, err := c.Client.ListPageRaw(ctx, pf, f.Cursor, ro.public())
	if err != nil {
		return nil, nil, err
	}
	var l api.List
	if err := decode("list", raw, &l); err != nil {
		return nil, nil, err
	}
	return &l, raw, nil
}

// Stats returns the statistics of a space and their JSON as sent.
func (c *Client) Stats(ctx context.Context, ro ReadOptions) (*api.Stats, []byte, error) {
	raw, err := c.Client.StatsRaw(ctx, ro.public())
	if err != nil {
		return nil, nil, err
	}
	st := api.NewStats()
	if err := decode("stats", raw, st); err != nil {
		return nil, nil, err
	}
	return st, raw, nil
}

// Status returns /v1/status.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	st, err := c.Client.Status(ctx)
	if err != nil {
		return nil, err
	}
	return &api.Status{StreamSeq: st.StreamSeq, ProjectedSeq: st.ProjectedSeq, Lag: st.Lag, LogProblem: st.LogProblem}, nil
}

// PublishKernel appends one bare kernel submission (a Proposal or
// KernelRequest object, POST /v1/events?kernel=1): the ledger wraps it in
// its kernel/proposal envelope. A refusal is an *APIError whose code is
// the V-PROP rule id.
func (c *Client) PublishKernel(ctx context.Context, space string, bare []byte) (api.AppendResult, error) {
	a, err := c.Client.Append(ctx, bare, client.WithSpace(space), client.WithKernel())
	return api.AppendResult{ID: a.ID, Seq: a.Seq, Duplicate: a.Duplicate}, err
}

// PublishLines appends envelopes as one NDJSON POST and returns the
// per-line results, in order. The line numbers of the results are those
// the server saw (1-based positions in lines, blank lines counted).
func (c *Client) PublishLines(ctx context.Context, space string, lines [][]byte) ([]api.AppendResult, error) {
	return c.publishLines(ctx, space, lines, false)
}

// PublishKernelLines is PublishLines for bare kernel submissions, one per
// line (?kernel=1).
func (c *Client) PublishKernelLines(ctx context.Context, space string, lines [][]byte) ([]api.AppendResult, error) {
	return c.publishLines(ctx, space, lines, true)
}

func (c *Client) publishLines(ctx context.Context, space string, lines [][]byte, kernel bool) ([]api.AppendResult, error) {
	var body bytes.Buffer
	for _, l := range lines {
		body.Write(l)
		body.WriteByte('\n')
	}
	var out []api.AppendResult
	err := c.Client.AppendStream(ctx, &body, func(r api.AppendResult) error {
		out = append(out, r)
		return nil
	}, client.AppendOptions{Space: space, Kernel: kernel})
	return out, err
}

// Gaps returns one page of a space's recording gaps, oldest first (GET
// /v1/gaps; limit 0 = the server's default, cursor "" = from the first).
func (c *Client) Gaps(ctx context.Context, limit int, cursor string, ro ReadOptions) (*api.Gaps, error) {
	q := url.Values{}
	if ro.Space != "" {
		q.Set("space", ro.Space)
	}
	if ro.MinSeq > 0 {
		q.Set("min_seq", strconv.FormatUint(ro.MinSeq, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var g api.Gaps
	if err := c.Do(ctx, http.MethodGet, "/v1/gaps", q, nil, "", false, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// Publish appends one envelope to space ("" = the client's) through POST
// /v1/events: client.Append with the space as an argument, the form the
// tests use.
func (c *Client) Publish(ctx context.Context, space string, envelope []byte) (api.AppendResult, error) {
	return c.Client.Append(ctx, envelope, client.WithSpace(space))
}

// PublishStream appends the NDJSON envelopes of body as one streamed
// POST and calls each with every answer in order: client.AppendStream
// with the space and kernel flag as arguments.
func (c *Client) PublishStream(ctx context.Context, space string, kernel bool, body io.Reader, each func(api.AppendResult) error) error {
	return c.Client.AppendStream(ctx, body, each, client.AppendOptions{Space: space, Kernel: kernel})
}
