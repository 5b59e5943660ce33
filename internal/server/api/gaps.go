package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
)

// RouteGaps lists the recording gaps of a space's bridges (contract §7, §14).
const RouteGaps = "GET /v1/gaps"

// gapReader is the optional part of a Reader that lists recording gaps
// (*projections.Store implements it).
type gapReader interface {
	Gaps(space string, after uint64, limit int) ([]api.Gap, uint64, error)
}

// errNoGaps: the reader in place does not list gaps.
var errNoGaps = errors.New("api: this projection does not list gaps")

// Gaps is the reader in place's Gaps, or errNoGaps.
func (s *swapReader) Gaps(space string, after uint64, limit int) ([]api.Gap, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g, ok := s.r.(gapReader); ok {
		return g.Gaps(space, after, limit)
	}
	return nil, 0, errNoGaps
}

// gaps answers GET /v1/gaps?space=&limit=&cursor=: {"gaps":[...],
// "next_cursor":".."}, oldest first. The cursor is the sequence of the
// last gap of the previous page.
func (a *API) gaps(w http.ResponseWriter, r *http.Request) {
	rc, ok := a.readPrologue(w, r, paramLimit, paramCursor)
	if !ok {
		return
	}
	defer rc.release()
	limit := 0
	if v := rc.q.Get(paramLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > projections.MaxGapsLimit {
			writeError(w, http.StatusBadRequest, badParam(paramLimit, "limit must be an integer in 1..%d, not %q", projections.MaxGapsLimit, v))
			return
		}
		limit = n
	}
	var after uint64
	if v := rc.q.Get(paramCursor); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, badParam(paramCursor, "cursor must be the next_cursor of a previous page, not %q", v))
			return
		}
		after = n
	}
	gr, ok := rc.r.(gapReader)
	if !ok {
		a.internal(w, r, errNoGaps)
		return
	}
	gs, next, err := gr.Gaps(rc.space, after, limit)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	if gs == nil {
		gs = []api.Gap{}
	}
	if err := markCovered(rc.r, rc.space, gs); err != nil {
		a.internal(w, r, err)
		return
	}
	body := api.Gaps{Gaps: gs}
	if next != 0 {
		body.NextCursor = strconv.FormatUint(next, 10)
	}
	writeJSON(w, http.StatusOK, body)
}

// RouteBridges lists what the ledger knows of each bridge recording into
// a space (contract §14): its last session, last stored envelope, and whether
// a gap covers everything since (a bridge reads it when it starts).
const RouteBridges = "GET /v1/bridges"

// Parameters of GET /v1/bridges.
const (
	paramBridge   = "bridge"
	paramMEWSpace = "mew_space"
)

// bridgeReader is the optional part of a Reader that lists bridge
// sessions (*projections.Store implements it).
type bridgeReader interface {
	BridgeSessions(space string) ([]api.BridgeSession, error)
}

// errNoBridges: the reader in place does not list bridges.
var errNoBridges = errors.New("api: this projection does not list bridges")

// BridgeSessions is the reader in place's BridgeSessions, or errNoBridges.
func (s *swapReader) BridgeSessions(space string) ([]api.BridgeSession, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if g, ok := s.r.(bridgeReader); ok {
		return g.BridgeSessions(space)
	}
	return nil, errNoBridges
}

// minSeqLatest is GET /v1/bridges' min_seq=latest: the log's last
// sequence when the request arrives.
const minSeqLatest = "latest"

// bridges answers GET /v1/bridges?space=&bridge=&mew_space=[&min_seq=N|latest]:
// {"bridges":[...]} ordered by bridge and MEW space, those of one bridge
// (and MEW space) when given.
func (a *API) bridges(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Get(paramMinSeq) == minSeqLatest {
		// A bridge starting (role recorder, not auditor: it cannot read
		// /v1/status) waits for everything the log holds now.
		last, err := a.opts.StreamSeq(r.Context())
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "reading the log's last sequence: " + err.Error()})
			return
		}
		q.Set(paramMinSeq, strconv.FormatUint(last, 10))
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	rc, ok := a.readPrologue(w, r, paramBridge, paramMEWSpace)
	if !ok {
		return
	}
	defer rc.release()
	br, ok := rc.r.(bridgeReader)
	if !ok {
		a.internal(w, r, errNoBridges)
		return
	}
	all, err := br.BridgeSessions(rc.space)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	out := []api.BridgeSession{}
	for _, b := range all {
		if v := rc.q.Get(paramBridge); v != "" && b.Bridge != v {
			continue
		}
		if rc.q.Has(paramMEWSpace) && b.MEWSpace != rc.q.Get(paramMEWSpace) {
			continue
		}
		out = append(out, b)
	}
	writeJSON(w, http.StatusOK, api.Bridges{Bridges: out})
}
