package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mewledger/ledger/api"
)

// Get returns one proposal. A proposal that does not exist is an *Error
// matching ErrNotFound.
func (c *Client) Get(ctx context.Context, id string, opts ...ReadOption) (*api.Proposal, error) {
	var p api.Proposal
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals/"+url.PathEscape(id), c.readValues(opts), nil, "", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetRaw returns one proposal's JSON exactly as the ledger sent it.
func (c *Client) GetRaw(ctx context.Context, id string, opts ...ReadOption) ([]byte, error) {
	var raw []byte
	err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals/"+url.PathEscape(id), c.readValues(opts), nil, "", &raw)
	return raw, err
}

// HistoryRaw returns the JSON of History exactly as the ledger sent it.
func (c *Client) HistoryRaw(ctx context.Context, id string, opts ...ReadOption) ([]byte, error) {
	var raw []byte
	err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals/"+url.PathEscape(id)+"/history", c.readValues(opts), nil, "", &raw)
	return raw, err
}

// History returns every event filed under id, in stream order, with its
// effect.
func (c *Client) History(ctx context.Context, id string, opts ...ReadOption) (*api.History, error) {
	var h api.History
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals/"+url.PathEscape(id)+"/history", c.readValues(opts), nil, "", &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// ListFilter holds the list filters; empty fields do not filter.
type ListFilter struct {
	State    string // pending, fulfilled, withdrawn, rejected, expired
	Proposer string
	Target   string // a participant the proposal targets
	Anomaly  string
	// Since and Until bound the creation time: RFC 3339 or YYYY-MM-DD,
	// since inclusive, until exclusive.
	Since, Until string
	// Kernel proposals: by action type, target resource type, domain.
	ActionType, ResourceType, Domain string
	// Form selects proposals with an event of this lifecycle form (e.g.
	// "bid", "proposal-response", "meup.lifecycle/status").
	Form string
	// Limit is the page size (server default when 0).
	Limit int
}

func (c *Client) listValues(f ListFilter, cursor string, opts []ReadOption) url.Values {
	q := c.readValues(opts)
	for k, v := range map[string]string{"state": f.State, "proposer": f.Proposer, "target": f.Target, "anomaly": f.Anomaly,
		"since": f.Since, "until": f.Until, "action_type": f.ActionType, "resource_type": f.ResourceType, "domain": f.Domain, "form": f.Form, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// ListPage returns one page of proposals, newest first, starting at
// cursor ("" for the first page).
func (c *Client) ListPage(ctx context.Context, f ListFilter, cursor string, opts ...ReadOption) (*api.List, error) {
	var p api.List
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals", c.listValues(f, cursor, opts), nil, "", &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListPageRaw returns the JSON of ListPage exactly as the ledger sent it.
func (c *Client) ListPageRaw(ctx context.Context, f ListFilter, cursor string, opts ...ReadOption) ([]byte, error) {
	var raw []byte
	err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/proposals", c.listValues(f, cursor, opts), nil, "", &raw)
	return raw, err
}

// List iterates over every proposal the filter selects, newest first,
// fetching one page at a time as the loop goes on (it never holds more
// than a page). An error ends the iteration after it is yielded.
func (c *Client) List(ctx context.Context, f ListFilter, opts ...ReadOption) iter.Seq2[*api.Proposal, error] {
	return func(yield func(*api.Proposal, error) bool) {
		cursor := ""
		for {
			page, err := c.ListPage(ctx, f, cursor, opts...)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, p := range page.Proposals {
				if !yield(p, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			cursor = page.NextCursor
		}
	}
}

// Stats returns the statistics of a space.
func (c *Client) Stats(ctx context.Context, opts ...ReadOption) (*api.Stats, error) {
	st := api.NewStats()
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/stats", c.readValues(opts), nil, "", st); err != nil {
		return nil, err
	}
	return st, nil
}

// StatsRaw returns the JSON of Stats exactly as the ledger sent it.
func (c *Client) StatsRaw(ctx context.Context, opts ...ReadOption) ([]byte, error) {
	var raw []byte
	err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/stats", c.readValues(opts), nil, "", &raw)
	return raw, err
}

// Status returns the stream's last sequence, the projection's, and the
// lag between them.
func (c *Client) Status(ctx context.Context) (*api.Status, error) {
	var st api.Status
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/status", nil, nil, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}
