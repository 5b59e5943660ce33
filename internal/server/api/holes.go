package api

import (
	"errors"
	"net/http"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
)

// RouteHoles lists the holes of a space (contract §14 "Several
// recorders"): the windows in which no recorder of a MEW space was
// recording.
const RouteHoles = "GET /v1/holes"

// coverageReader is the optional part of a Reader that works out which
// gaps other recorders covered and the holes (*projections.Store
// implements it).
type coverageReader interface {
	Coverage(space string, mewSpace *string) (*projections.Coverage, error)
}

// errNoCoverage: the reader in place does not work out holes.
var errNoCoverage = errors.New("api: this projection does not work out holes")

// Coverage is the reader in place's Coverage, or errNoCoverage.
func (s *swapReader) Coverage(space string, mewSpace *string) (*projections.Coverage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c, ok := s.r.(coverageReader); ok {
		return c.Coverage(space, mewSpace)
	}
	return nil, errNoCoverage
}

// holes answers GET /v1/holes?space=[&mew_space=]: {"holes":[...],
// "recorders":[...]}.
func (a *API) holes(w http.ResponseWriter, r *http.Request) {
	rc, ok := a.readPrologue(w, r, paramMEWSpace)
	if !ok {
		return
	}
	defer rc.release()
	cr, ok := rc.r.(coverageReader)
	if !ok {
		a.internal(w, r, errNoCoverage)
		return
	}
	var ms *string
	if rc.q.Has(paramMEWSpace) {
		v := rc.q.Get(paramMEWSpace)
		ms = &v
	}
	c, err := cr.Coverage(rc.space, ms)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	body := api.Holes{Holes: c.Holes, Recorders: []api.BridgeSession{}}
	if br, ok := rc.r.(bridgeReader); ok {
		all, err := br.BridgeSessions(rc.space)
		if err != nil {
			a.internal(w, r, err)
			return
		}
		for _, b := range all {
			if ms == nil || b.MEWSpace == *ms {
				body.Recorders = append(body.Recorders, b)
			}
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// markCovered sets Covered and CoveredBy on a page of gaps of space.
func markCovered(rd Reader, space string, gs []api.Gap) error {
	cr, ok := rd.(coverageReader)
	if !ok || len(gs) == 0 {
		return nil
	}
	c, err := cr.Coverage(space, nil)
	if errors.Is(err, errNoCoverage) {
		return nil
	}
	if err != nil {
		return err
	}
	by := make(map[uint64]*api.Gap, len(c.Gaps))
	for i := range c.Gaps {
		by[c.Gaps[i].Seq] = &c.Gaps[i]
	}
	for i := range gs {
		if g := by[gs[i].Seq]; g != nil {
			gs[i].Covered, gs[i].CoveredBy = g.Covered, g.CoveredBy
		}
	}
	return nil
}

// recordingCounts sets the holes and covered gaps of space on st.
func recordingCounts(rd Reader, space string, st *api.Stats) error {
	cr, ok := rd.(coverageReader)
	if !ok || st == nil {
		return nil
	}
	c, err := cr.Coverage(space, nil)
	if errors.Is(err, errNoCoverage) {
		return nil
	}
	if err != nil {
		return err
	}
	st.Holes, st.CoveredGaps = int64(len(c.Holes)), 0
	for _, g := range c.Gaps {
		if g.Covered {
			st.CoveredGaps++
		}
	}
	return nil
}
