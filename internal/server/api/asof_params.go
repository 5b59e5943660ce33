package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections/projector"
)

// As-of query parameters (contract §9): the state after a sequence, or at a
// time, instead of the live projection's.
const (
	paramAsOfSeq = "as_of_seq"
	paramAsOf    = "as_of"
)

// HeaderAsOfSeq is set on an as-of answer: the last sequence folded into
// the projection it was answered from.
const HeaderAsOfSeq = "Ledger-As-Of-Seq"

// ErrBeyondLog is what an AsOfFunc returns (wrapped) for a point after the
// end of the log: answered 400 beyond_log.
var ErrBeyondLog = projector.ErrBeyondLog

// AsOfBusyError is what an AsOfFunc returns when the caller's share of
// as-of folds (Status 429) or the server's (503) is taken: answered with
// code as_of_busy and Retry-After.
type AsOfBusyError struct {
	Status  int
	Message string
}

func (e *AsOfBusyError) Error() string { return "as-of folds busy: " + e.Message }

// AsOfPoint is a past point of the log: a sequence (the state after
// folding it) or a time (the state after every event stored at or before
// it). Exactly one is set.
type AsOfPoint struct {
	Seq  uint64
	Time time.Time
}

// AsOfFunc returns a Reader of the projection as of p, and a release
// function the caller calls when it is done reading. A point after the
// end of the log is an error wrapping ErrBeyondLog.
type AsOfFunc func(ctx context.Context, p AsOfPoint) (Reader, func(), error)

// readCtx is what a read handler answers from.
type readCtx struct {
	q       url.Values
	space   string
	r       Reader
	release func()
}

// asOfPoint parses ?as_of_seq= / ?as_of=; ok is false when neither is
// given.
func asOfPoint(q url.Values) (AsOfPoint, bool, *api.Error) {
	seqV, timeV := q.Get(paramAsOfSeq), q.Get(paramAsOf)
	switch {
	case seqV == "" && timeV == "":
		return AsOfPoint{}, false, nil
	case seqV != "" && timeV != "":
		return AsOfPoint{}, false, badParam(paramAsOf, "give as_of_seq or as_of, not both")
	case q.Get(paramMinSeq) != "":
		return AsOfPoint{}, false, badParam(paramMinSeq, "min_seq waits for the live projection; an as-of query is answered from the log, so it takes no min_seq")
	case seqV != "":
		n, err := strconv.ParseUint(seqV, 10, 64)
		if err != nil || n == 0 {
			return AsOfPoint{}, false, badParam(paramAsOfSeq, "as_of_seq must be a stream sequence (an integer ≥ 1), not %q", seqV)
		}
		return AsOfPoint{Seq: n}, true, nil
	}
	t, e := parseTime(paramAsOf, timeV)
	if e != nil {
		return AsOfPoint{}, false, e
	}
	return AsOfPoint{Time: t}, true, nil
}

// asOfReader answers the as-of point of a read: a Reader folded to it, or
// an error answer (written; ok false).
func (a *API) asOfReader(w http.ResponseWriter, r *http.Request, p AsOfPoint) (Reader, func(), bool) {
	rd, release, err := a.opts.AsOf(r.Context(), p)
	var busy *AsOfBusyError
	switch {
	case err == nil:
		w.Header().Set(HeaderAsOfSeq, strconv.FormatUint(rd.AppliedSeq(), 10))
		return rd, release, true
	case errors.Is(err, ErrBeyondLog):
		field := paramAsOfSeq
		if p.Seq == 0 {
			field = paramAsOf
		}
		detail := err.Error()
		if i := strings.Index(detail, ErrBeyondLog.Error()+": "); i >= 0 {
			detail = detail[i+len(ErrBeyondLog.Error())+2:]
		}
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBeyondLog, Field: field,
			Message: "the point is beyond the end of the log: " + detail})
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", "2")
		writeError(w, busy.Status, &api.Error{Code: api.CodeAsOfBusy, Message: busy.Message})
	case r.Context().Err() != nil:
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable,
			Message: "the request ended before the log was folded to the point asked for"})
	default:
		a.internal(w, r, err)
	}
	return nil, nil, false
}
