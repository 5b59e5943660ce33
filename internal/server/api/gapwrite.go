package api

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/ledger"
)

// RouteGapsPost is the gap write path of bridges (contract §14).
const RouteGapsPost = "POST /v1/gaps"

// Log keys of gap reports.
const (
	keyBridge = "bridge"
	keyGapID  = "gap_id"
)

// maxGapBody bounds a gap report's body.
const maxGapBody = 64 << 10

// SystemAppender appends the envelopes the ledger writes itself.
// *appendlog.Appender implements it.
type SystemAppender interface {
	AppendSystem(ctx context.Context, space string, raw []byte) (ledger.Result, error)
}

// postGap records a bridge's gap: the ledger builds the ledger/gap
// envelope itself (ledger.GapEnvelope, sender "ledger") and appends it
// with AppendSystem, so no client can write as the ledger. 202
// {"id","seq","duplicate"} (a repeated report is a duplicate), 400 with
// the field, 503 when not acknowledged.
func (a *API) postGap(w http.ResponseWriter, r *http.Request) {
	if a.storageFull(w) {
		return
	}
	sys, _ := a.opts.Appender.(SystemAppender)
	q := r.URL.Query()
	if e := params(q, paramSpace); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	space, e := spaceParam(q, a.opts.Space)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxGapBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		a.tooLarge(w, maxGapBody, "the gap report")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadRequest, Message: "reading the body: " + err.Error()})
		return
	}
	g, err := ledger.ParseGap(body)
	if err != nil {
		e := ledger.WireError(err)
		a.opts.Metrics.Refused(metrics.PathHTTP, e.Code)
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if !a.checkGapReport(w, r, g) {
		return
	}
	raw, _ := ledger.GapEnvelope(g) // ParseGap checked it builds
	wctx, cancel := a.storageCtx(r.Context())
	defer cancel()
	res, err := sys.AppendSystem(wctx, space, raw)
	out := ledger.WireResult(res)
	a.count(metrics.PathHTTP, res)
	switch {
	case err != nil && wctx.Err() != nil && r.Context().Err() == nil && a.storageFull(w):
		// The disk filled while this gap waited: not acknowledged
		// (retrying is safe), and said so at once.
	case err == nil:
		a.log.Info().Str(keyBridge, g.Bridge).Str(keyGapID, res.ID).Uint64(logging.KeySeq, res.Seq).Msg("gap recorded")
		writeJSON(w, http.StatusAccepted, out)
	case errors.Is(err, ledger.ErrRefused):
		writeError(w, http.StatusBadRequest, out.Error)
	case errors.Is(err, ledger.ErrPublish):
		a.log.Warn().Err(err).Msg("gap not acknowledged")
		writeError(w, http.StatusServiceUnavailable, out.Error)
	default:
		a.internal(w, r, err)
	}
}

// mountGapWrite mounts POST /v1/gaps when the Appender can append the
// ledger's own envelopes.
func (a *API) mountGapWrite() {
	if _, ok := a.opts.Appender.(SystemAppender); ok {
		a.mux.HandleFunc(RouteGapsPost, a.postGap)
	}
}
