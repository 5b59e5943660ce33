package api

import (
	"errors"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
)

// A proposal whose lifecycle crosses a recording hole says so (contract
// §14 "Several recorders"): GET /v1/proposals/{id} and the list's items
// carry hole_crossing (api.HoleCrossing) when it crosses one. It is worked
// out at read time from the holes the reader in use gives (live, or as of
// a past point) and the proposal's history, never stored: the fold is
// unchanged and a rebuild answers the same. A space without holes (the
// usual case) is served from the stored bytes as before.

// spaceHoles returns the holes of every MEW space recorded into space, as
// rd knows them; none when rd does not work them out.
func spaceHoles(rd Reader, space string) ([]api.Hole, error) {
	cr, ok := rd.(coverageReader)
	if !ok {
		return nil, nil
	}
	c, err := cr.Coverage(space, nil)
	if errors.Is(err, errNoCoverage) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.Holes, nil
}

// crossHoles sets HoleCrossing on each proposal of ps whose lifecycle
// crosses one of hs: from the smallest sequence of its events (its
// creation included) to the largest, or to the log's end while pending.
func crossHoles(rd Reader, space string, hs []api.Hole, ps []*api.Proposal) error {
	if len(hs) == 0 {
		return nil
	}
	for _, p := range ps {
		p.HoleCrossing = nil
		first, last := p.CreatedSeq, p.CreatedSeq
		h, err := rd.History(space, p.ID)
		if err != nil && !errors.Is(err, projections.ErrNotFound) {
			return err
		}
		for _, e := range h {
			if e.Seq == 0 {
				continue
			}
			if first == 0 || e.Seq < first {
				first = e.Seq
			}
			last = max(last, e.Seq)
		}
		if first == 0 {
			continue
		}
		open := !p.Terminal()
		if crossed := api.CrossedHoles(first, last, open, hs); len(crossed) > 0 {
			p.HoleCrossing = &api.HoleCrossing{FirstSeq: first, LastSeq: last, Open: open, Holes: crossed}
		}
	}
	return nil
}
