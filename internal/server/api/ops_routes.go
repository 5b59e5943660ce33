package api

import (
	"context"
	"errors"
	"fmt"
	"github.com/mewledger/ledger/internal/server/integrity"
	"net/http"
	"strconv"

	"github.com/mewledger/ledger/api"
)

// Routes of the online operations (contract §9). They need the ops role when
// the API is protected (package httpauth: every route but reads and
// POST /v1/events).
const (
	RouteOpsRebuild       = "POST /v1/ops/rebuild"
	RouteOpsRebuildStatus = "GET /v1/ops/rebuild"
	RouteOpsVerify        = "POST /v1/ops/verify"
)

// ErrBusy is returned (wrapped) by Ops when another operation runs:
// answered 409 busy.
var ErrBusy = errors.New("api: another operation is running")

// ErrCannotOperate is returned (wrapped, with the reason) by Ops when the
// ledger cannot run an operation at all: the log does not match the
// projection (the stream is gone, recreated, lost history), the log
// cannot be checked, the ledger is not serving yet or is shutting down.
// Answered 503 not_ready with the reason: retrying will not help until
// what the message says is fixed.
var ErrCannotOperate = errors.New("api: the ledger cannot run the operation")

// opsRefusal answers err when it is ErrBusy or ErrCannotOperate and
// reports whether it did.
func opsRefusal(w http.ResponseWriter, err error) bool {
	if d, ok := integrity.Damage(err); ok {
		writeError(w, http.StatusConflict, damagedError(d))
		return true
	}
	switch {
	case errors.Is(err, ErrCannotOperate):
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeNotReady, Message: err.Error()})
	case errors.Is(err, ErrBusy):
		writeError(w, http.StatusConflict, &api.Error{Code: api.CodeBusy, Message: err.Error()})
	default:
		return false
	}
	return true
}

// Ops are the online operations; package app implements them on the
// running ledger.
type Ops interface {
	// StartRebuild starts an online rebuild in the background and returns
	// its status, or an error wrapping ErrBusy or ErrCannotOperate.
	StartRebuild() (api.RebuildStatus, error)
	// RebuildStatus is the running (or the last) rebuild's status.
	RebuildStatus() api.RebuildStatus
	// WaitRebuild waits until no rebuild runs (or ctx ends) and returns
	// the status.
	WaitRebuild(ctx context.Context) (api.RebuildStatus, error)
	// Verify compares the live projection with a rebuild of the log up to
	// its checkpoint (the projector paused meanwhile). A difference is a
	// result with OK false, not an error; ErrBusy when another operation
	// runs, ErrCannotOperate when the ledger cannot verify.
	Verify(ctx context.Context) (api.VerifyResult, error)
}

const paramWait = "wait"

// postRebuild starts an online rebuild: 202 with its status, or with
// ?wait=true 200 with the final status once it has finished (500
// rebuild_failed when it failed). 409 busy when an operation runs; 503
// not_ready when the ledger cannot rebuild (the stream is gone, ...).
func (a *API) postRebuild(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramWait); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	wait := false
	if v := q.Get(paramWait); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, badParam(paramWait, "wait must be true or false, not %q", v))
			return
		}
		wait = b
	}
	st, err := a.opts.Ops.StartRebuild()
	if opsRefusal(w, err) {
		return
	}
	if err != nil {
		a.internal(w, r, err)
		return
	}
	if !wait {
		writeJSON(w, http.StatusAccepted, st)
		return
	}
	st, err = a.opts.Ops.WaitRebuild(r.Context())
	if err != nil {
		// The client went away; the rebuild goes on.
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "stopped waiting: " + err.Error()})
		return
	}
	if st.Phase == api.RebuildFailed {
		writeError(w, http.StatusInternalServerError, &api.Error{Code: api.CodeRebuildFailed, Message: "the rebuild failed; the old projection still serves: " + st.Error})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *API) getRebuild(w http.ResponseWriter, r *http.Request) {
	if e := params(r.URL.Query()); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	writeJSON(w, http.StatusOK, a.opts.Ops.RebuildStatus())
}

// postVerify runs an online verify: 200 with {"ok":..,"seq":..,...}
// whether or not the projection matches; 409 busy; 503 not_ready when
// the ledger cannot verify (the stream is gone, ...).
func (a *API) postVerify(w http.ResponseWriter, r *http.Request) {
	if e := params(r.URL.Query()); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	res, err := a.opts.Ops.Verify(r.Context())
	switch {
	case opsRefusal(w, err):
	case err != nil && r.Context().Err() != nil:
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: fmt.Sprintf("verify stopped: %v", err)})
	case err != nil:
		a.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
