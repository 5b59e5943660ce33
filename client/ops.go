package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/mewledger/ledger/api"
)

// The operations routes (role ops) and a recorder's gap report (role
// writer): what the ledger's own tools call beyond reads and appends.

// StartRebuild starts an online rebuild (POST /v1/ops/rebuild) and
// returns its status. Another operation running is an *api.Error with
// status 409 and code api.CodeBusy.
func (c *Client) StartRebuild(ctx context.Context) (*api.RebuildStatus, error) {
	var st api.RebuildStatus
	if err := c.do(ctx, c.opts.HTTP, http.MethodPost, "/v1/ops/rebuild", nil, nil, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// RebuildStatus returns the running or last online rebuild's status (GET
// /v1/ops/rebuild).
func (c *Client) RebuildStatus(ctx context.Context) (*api.RebuildStatus, error) {
	var st api.RebuildStatus
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/ops/rebuild", nil, nil, "", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Verify runs an online verify (POST /v1/ops/verify): the live projection
// compared with a fold of the log. A difference is a result with OK false,
// not an error. It may take as long as a rebuild: ctx bounds it, not the
// client's timeout.
func (c *Client) Verify(ctx context.Context) (*api.VerifyResult, error) {
	var res api.VerifyResult
	if err := c.do(ctx, c.streaming(), http.MethodPost, "/v1/ops/verify", nil, nil, "", &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ReportGap asks the ledger to record a recorder's gap (POST /v1/gaps):
// the ledger writes the ledger/gap event itself, with sender "ledger"
// (contract §14). gap is the report's JSON object (the bridge's report,
// marshalled with encoding/json). The answer is the event's id, seq and
// duplicate; reporting the same gap again is a duplicate.
func (c *Client) ReportGap(ctx context.Context, space string, gap any) (api.AppendResult, error) {
	body, err := json.Marshal(gap)
	if err != nil {
		return api.AppendResult{}, fmt.Errorf("gap report: %w", err)
	}
	q := url.Values{}
	if space != "" {
		q.Set("space", space)
	}
	var r api.AppendResult
	err = c.do(ctx, c.opts.HTTP, http.MethodPost, "/v1/gaps", q, bytes.NewReader(body), "application/json", &r)
	return r, err
}
