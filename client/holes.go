package client

import (
	"context"
	"net/http"

	"github.com/mewledger/ledger/api"
)

// Holes returns the holes of a space (contract §14 "Several recorders"):
// the windows in which no recorder of a MEW space was recording, and what
// the ledger knows of each recorder. mewSpace narrows them to one MEW
// space ("" for all of them).
func (c *Client) Holes(ctx context.Context, mewSpace string, opts ...ReadOption) (*api.Holes, error) {
	q := c.readValues(opts)
	if mewSpace != "" {
		q.Set("mew_space", mewSpace)
	}
	var h api.Holes
	if err := c.do(ctx, c.opts.HTTP, http.MethodGet, "/v1/holes", q, nil, "", &h); err != nil {
		return nil, err
	}
	return &h, nil
}
