package projections_test

import (
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
)

// The helpers the store's tests share with the projector's
// (projections/projector keeps its own copies: a test package cannot
// import another's).

func openStore(t *testing.T, dir string) *projections.Store {
	t.Helper()
	s, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// essence is a proposal without what depends on where its events sit in
// the log (sequences, times) or on events filed under it that did not
// apply (events, updated_*).
func essence(p *api.Proposal) *api.Proposal {
	c := p.Clone()
	c.CreatedSeq, c.UpdatedSeq, c.DecidedSeq, c.Events = 0, 0, 0, 0
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = time.Time{}, time.Time{}, nil
	for i := range c.Rejections {
		c.Rejections[i].Seq = 0
	}
	for i := range c.Fulfillments {
		c.Fulfillments[i].Seq = 0
		for j := range c.Fulfillments[i].Responses {
			c.Fulfillments[i].Responses[j].Seq = 0
		}
	}
	for i := range c.Approvals {
		c.Approvals[i].Seq = 0
	}
	if c.Withdrawal != nil {
		c.Withdrawal.Seq = 0
	}
	return c
}
