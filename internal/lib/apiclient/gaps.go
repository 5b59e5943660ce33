package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// ReportGap asks the ledger to record a bridge's recording gap (POST
// /v1/gaps, role writer): the ledger writes the ledger/gap event itself,
// with sender "ledger" (contract §14). The answer is the event's
// {"id","seq","duplicate"}; reporting the same gap again is a duplicate.
func (c *Client) ReportGap(ctx context.Context, space string, g ledger.Gap) (api.AppendResult, error) {
	body, err := json.Marshal(g)
	if err != nil {
		return api.AppendResult{}, fmt.Errorf("apiclient: gap: %w", err)
	}
	q := url.Values{}
	if space != "" {
		q.Set("space", space)
	}
	var r api.AppendResult
	err = c.pc.Do(ctx, http.MethodPost, "/v1/gaps", q, bytes.NewReader(body), "application/json", false, &r)
	return r, ConvertError(err)
}
