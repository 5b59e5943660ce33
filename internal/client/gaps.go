package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/ledger"
)

// ReportGap asks the ledger to record a bridge's recording gap (POST
// /v1/gaps, role writer): the ledger writes the ledger/gap event itself,
// with sender "ledger" (SPEC §14). The answer is the event's
// {"id","seq","duplicate"}; reporting the same gap again is a duplicate.
func (c *Client) ReportGap(ctx context.Context, space string, g ledger.Gap) (wire.AppendResult, error) {
	body, err := json.Marshal(g)
	if err != nil {
		return wire.AppendResult{}, fmt.Errorf("client: gap: %w", err)
	}
	q := url.Values{}
	if space != "" {
		q.Set("space", space)
	}
	var r wire.AppendResult
	err = c.pc.Do(ctx, http.MethodPost, "/v1/gaps", q, bytes.NewReader(body), "application/json", false, &r)
	return r, apiErr(err)
}

// Gaps returns one page of a space's recording gaps, oldest first (GET
// /v1/gaps; limit 0 = the server's default, cursor "" = from the first).
func (c *Client) Gaps(ctx context.Context, limit int, cursor string, ro ReadOptions) (*wire.Gaps, error) {
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
	var g wire.Gaps
	if err := c.pc.Do(ctx, http.MethodGet, "/v1/gaps", q, nil, "", false, &g); err != nil {
		return nil, apiErr(err)
	}
	return &g, nil
}
