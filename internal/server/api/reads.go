package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/connbudget"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
)

// Query parameters.
const (
	paramSpace        = "space"
	paramMinSeq       = "min_seq"
	paramState        = "state"
	paramProposer     = "proposer"
	paramTarget       = "target"
	paramSince        = "since"
	paramUntil        = "until"
	paramAnomaly      = "anomaly"
	paramActionType   = "action_type"
	paramResourceType = "resource_type"
	paramDomain       = "domain"
	paramForm         = "form"
	paramLimit        = "limit"
	paramCursor       = "cursor"
)

// badParam is a 400 about one query parameter.
func badParam(param, format string, args ...any) *api.Error {
	return &api.Error{Code: api.CodeBadQuery, Field: param, Message: fmt.Sprintf(format, args...)}
}

// params checks that q holds only allowed parameters, each at most once.
func params(q url.Values, allowed ...string) *api.Error {
	for k, v := range q {
		if !slices.Contains(allowed, k) {
			return &api.Error{Code: api.CodeUnknownParameter, Field: k,
				Message: fmt.Sprintf("unknown query parameter %q (this route takes: %s)", k, strings.Join(allowed, ", "))}
		}
		if len(v) > 1 {
			return badParam(k, "%s is given %d times; give it once", k, len(v))
		}
	}
	return nil
}

// space returns ?space= or the default space.
func (a *API) space(q url.Values) (string, *api.Error) {
	s, e := spaceParam(q, a.opts.Space)
	if e == nil && !validSpace(s) {
		e = badParam(paramSpace, "space must be 1..%d bytes of UTF-8", ledger.MaxSpaceBytes)
	}
	return s, e
}

// readPrologue checks the parameters of a read route and returns what to
// answer from: the live projection after waiting for min_seq, or a
// projection as of as_of_seq / as_of (when the API has an AsOf). On false
// it has answered; otherwise the caller calls rc.release when done.
func (a *API) readPrologue(w http.ResponseWriter, r *http.Request, allowed ...string) (*readCtx, bool) {
	q := r.URL.Query()
	allowed = append(allowed, paramSpace, paramMinSeq)
	if a.opts.AsOf != nil {
		allowed = append(allowed, paramAsOfSeq, paramAsOf)
	}
	if e := params(q, allowed...); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return nil, false
	}
	space, e := a.space(q)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return nil, false
	}
	p, asOf, e := asOfPoint(q)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return nil, false
	}
	if asOf {
		rd, release, ok := a.asOfReader(w, r, p)
		if !ok {
			return nil, false
		}
		return &readCtx{q: q, space: space, r: rd, release: release}, true
	}
	if !a.waitMinSeq(w, r, q) {
		return nil, false
	}
	return &readCtx{q: q, space: space, r: a.reader, release: func() {}}, true
}

// waitMinSeq waits for ?min_seq= (bounded); on false it has answered.
func (a *API) waitMinSeq(w http.ResponseWriter, r *http.Request, q url.Values) bool {
	v := q.Get(paramMinSeq)
	if v == "" {
		return true
	}
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, badParam(paramMinSeq, "min_seq must be a stream sequence (a non-negative integer), not %q", v))
		return false
	}
	if a.reader.AppliedSeq() >= seq {
		return true
	}
	// The wait counts against the caller's share of waiting requests
	// (issue 36 item 2): over it, refused at once.
	release, err := connbudget.Hold(r.Context())
	if err != nil {
		connbudget.WriteRefusal(w, err)
		return false
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.MinSeqWait)
	defer cancel()
	if err := a.reader.WaitApplied(ctx, seq); err != nil {
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeNotCaughtUp, Field: paramMinSeq,
			Message: fmt.Sprintf("the projection has applied seq %d, not %d, after waiting %v; retry later", a.reader.AppliedSeq(), seq, a.opts.MinSeqWait)})
		return false
	}
	return true
}

func (a *API) getProposal(w http.ResponseWriter, r *http.Request) {
	rc, ok := a.readPrologue(w, r)
	if !ok {
		return
	}
	defer rc.release()
	space := rc.space
	id := r.PathValue("id")
	holes, err := spaceHoles(rc.r, space)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	if len(holes) == 0 && a.getRaw(w, r, rc.r, space, id) {
		return
	}
	p, err := rc.r.Get(space, id)
	if err == nil {
		err = crossHoles(rc.r, space, holes, []*api.Proposal{p})
	}
	switch {
	case errors.Is(err, projections.ErrNotFound):
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "id",
			Message: fmt.Sprintf("no proposal %q in space %q", id, space)})
	case err != nil:
		a.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, normalize(p))
	}
}

// normalize gives the list members of the proposal object their contract §7
// shape: [] rather than null when empty.
func normalize(p *api.Proposal) *api.Proposal {
	if p.To == nil {
		p.To = []string{}
	}
	if p.Rejections == nil {
		p.Rejections = []api.Rejection{}
	}
	if p.Fulfillments == nil {
		p.Fulfillments = []api.Fulfillment{}
	}
	if p.Anomalies == nil {
		p.Anomalies = []string{}
	}
	return p
}

func (a *API) getHistory(w http.ResponseWriter, r *http.Request) {
	rc, ok := a.readPrologue(w, r)
	if !ok {
		return
	}
	defer rc.release()
	space := rc.space
	id := r.PathValue("id")
	h, err := rc.r.History(space, id)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "id",
			Message: fmt.Sprintf("no events filed under %q in space %q", id, space)})
	case err != nil:
		a.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, api.History{ID: id, Space: space, Events: h})
	}
}

// parseTime accepts RFC 3339 (with or without fractional seconds) or a
// date (YYYY-MM-DD, midnight UTC).
func parseTime(param, v string) (time.Time, *api.Error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, badParam(param, "%s must be an RFC 3339 time (2026-01-02T03:04:05Z) or a date (2026-01-02), not %q", param, v)
}

// ListQuery parses the list filters of q into a projections.ListQuery for
// space. Exported so ops routes (as-of queries) parse filters the same way.
func ListQuery(q url.Values, space string) (projections.ListQuery, *api.Error) {
	lq := projections.ListQuery{
		Space:        space,
		State:        api.ProposalState(q.Get(paramState)),
		Proposer:     q.Get(paramProposer),
		Target:       q.Get(paramTarget),
		Anomaly:      q.Get(paramAnomaly),
		ActionType:   q.Get(paramActionType),
		ResourceType: q.Get(paramResourceType),
		Domain:       q.Get(paramDomain),
		Form:         q.Get(paramForm),
		Cursor:       q.Get(paramCursor),
	}
	if lq.State != "" && !slices.Contains(api.States, lq.State) {
		return lq, badParam(paramState, "unknown state %q (states: %s)", lq.State, joinStates())
	}
	if lq.Anomaly != "" && !slices.Contains(api.AnomalyNames, lq.Anomaly) {
		return lq, badParam(paramAnomaly, "unknown anomaly %q (anomalies: %s)", lq.Anomaly, strings.Join(api.AnomalyNames, ", "))
	}
	if lq.ActionType != "" && !slices.Contains(api.ActionTypes, api.ActionType(lq.ActionType)) {
		return lq, badParam(paramActionType, "unknown action_type %q (types: %s)", lq.ActionType, joinActionTypes())
	}
	if v := q.Get(paramSince); v != "" {
		t, e := parseTime(paramSince, v)
		if e != nil {
			return lq, e
		}
		lq.Since = t
	}
	if v := q.Get(paramUntil); v != "" {
		t, e := parseTime(paramUntil, v)
		if e != nil {
			return lq, e
		}
		lq.Until = t
	}
	if !lq.Since.IsZero() && !lq.Until.IsZero() && !lq.Until.After(lq.Since) {
		return lq, badParam(paramUntil, "until (%s) must be after since (%s)", q.Get(paramUntil), q.Get(paramSince))
	}
	if v := q.Get(paramLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > projections.MaxListLimit {
			return lq, badParam(paramLimit, "limit must be an integer in 1..%d, not %q", projections.MaxListLimit, v)
		}
		lq.Limit = n
	}
	return lq, nil
}

func joinStates() string {
	s := make([]string, len(api.States))
	for i, st := range api.States {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func joinActionTypes() string {
	s := make([]string, len(api.ActionTypes))
	for i, t := range api.ActionTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	rc, ok := a.readPrologue(w, r, paramState, paramProposer, paramTarget, paramSince, paramUntil,
		paramAnomaly, paramActionType, paramResourceType, paramDomain, paramForm, paramLimit, paramCursor)
	if !ok {
		return
	}
	defer rc.release()
	lq, e := ListQuery(rc.q, rc.space)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	holes, err := spaceHoles(rc.r, rc.space)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	if len(holes) == 0 && a.listRaw(w, r, rc.r, lq) {
		return
	}
	page, err := rc.r.List(lq)
	if err == nil {
		err = crossHoles(rc.r, rc.space, holes, page.Proposals)
	}
	switch {
	case errors.Is(err, projections.ErrBadQuery):
		writeListError(w, lq, err)
	case err != nil:
		a.internal(w, r, err)
	default:
		if page.Proposals == nil {
			page.Proposals = []*api.Proposal{}
		}
		for _, p := range page.Proposals {
			normalize(p)
		}
		writeJSON(w, http.StatusOK, api.List{Proposals: page.Proposals, NextCursor: page.NextCursor})
	}
}

func (a *API) stats(w http.ResponseWriter, r *http.Request) {
	rc, ok := a.readPrologue(w, r)
	if !ok {
		return
	}
	defer rc.release()
	st, err := rc.r.Stats(rc.space)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	if err := recordingCounts(rc.r, rc.space, st); err != nil {
		a.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// currentStatus reads both sides of the lag. The projected side is read
// after the stream side, so lag never counts an event the projection has.
func (a *API) currentStatus(ctx context.Context) (api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.MinSeqWait)
	defer cancel()
	problem := ""
	if a.opts.LogProblem != nil {
		problem = a.opts.LogProblem()
	}
	if a.opts.WitnessAlarm != nil && problem == "" {
		problem = a.opts.WitnessAlarm()
	}
	last, err := a.opts.StreamSeq(ctx)
	if err != nil && problem == "" {
		return api.Status{}, err
	}
	st := api.Status{StreamSeq: last, ProjectedSeq: a.reader.AppliedSeq(), LogProblem: problem}
	if st.StreamSeq > st.ProjectedSeq {
		st.Lag = st.StreamSeq - st.ProjectedSeq
	}
	if a.opts.Integrity != nil {
		if d, ok := a.opts.Integrity.Current(); ok {
			st.LogDamage = &d
			if st.LogProblem == "" {
				st.LogProblem = d.Message
			}
		}
	}
	if a.opts.SigningStopped != nil {
		st.SigningStopped = a.opts.SigningStopped()
	}
	if a.opts.ProjectionHeld != nil {
		st.ProjectionHeld = a.opts.ProjectionHeld()
	}
	return st, nil
}

func (a *API) unavailable(w http.ResponseWriter, err error) {
	a.log.Warn().Err(err).Msg("stream unavailable")
	writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "the LEDGER stream did not answer: " + err.Error()})
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	// The live projection's status: min_seq, no as-of.
	q := r.URL.Query()
	if e := params(q, paramSpace, paramMinSeq); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if _, e := a.space(q); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if !a.waitMinSeq(w, r, q) {
		return
	}
	st, err := a.currentStatus(r.Context())
	if err != nil {
		a.unavailable(w, err)
		return
	}
	if a.opts.Scrub != nil {
		sc := a.opts.Scrub()
		st.Scrub = &sc
	}
	if a.opts.ImportedThrough != nil {
		if n, err := a.opts.ImportedThrough(r.Context()); err == nil {
			st.Import = &api.ImportBoundary{ImportedThrough: n, OriginalTimeHeader: ledger.HeaderOriginalTime, OriginalIDHeader: ledger.HeaderOriginalMsgID}
		}
	}
	if a.opts.Consumers != nil {
		// The consumers are a view for people (the console's status
		// page): a stream that does not list them leaves them out.
		if cs, err := a.opts.Consumers(r.Context()); err == nil {
			st.Consumers = cs
		} else {
			a.log.Warn().Err(err).Msg("list the stream's consumers")
		}
	}
	if a.opts.Witnessing != nil {
		st.Witnessing = a.opts.Witnessing()
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if a.opts.StorageProblem != nil {
		if p := a.opts.StorageProblem(); p != "" {
			writeJSON(w, http.StatusServiceUnavailable, api.Ready{Bound: a.opts.readyBound(),
				Status: api.Status{ProjectedSeq: a.reader.AppliedSeq(), LogProblem: p},
				Error:  &api.Error{Code: api.CodeStorageFull, Message: p}})
			return
		}
	}
	st, err := a.currentStatus(r.Context())
	if err != nil {
		a.unavailable(w, err)
		return
	}
	bound := a.opts.readyBound()
	res := api.Ready{Ready: st.Lag <= bound && st.LogProblem == "", Bound: bound, Status: st}
	if res.Ready {
		writeJSON(w, http.StatusOK, res)
		return
	}
	res.Error = &api.Error{Code: api.CodeNotReady,
		Message: fmt.Sprintf("the projection is %d events behind the stream (ready at %d or fewer)", st.Lag, bound)}
	if st.LogDamage != nil {
		res.Error = damagedError(*st.LogDamage)
	} else if st.LogProblem != "" {
		res.Error.Message = "log and projection disagree: " + st.LogProblem
		if a.opts.WitnessAlarm != nil && st.LogProblem == a.opts.WitnessAlarm() {
			res.Error.Message = "a witness refused the ledger's history: " + st.LogProblem
		}
	}
	writeJSON(w, http.StatusServiceUnavailable, res)
}
