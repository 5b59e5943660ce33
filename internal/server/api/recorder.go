package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/metrics"
	"github.com/mewledger/ledger/ledger"
)

// Only a recorder can speak for itself (contract §14, "Several
// recorders"): an append carrying a Ledger-Bridge mark, or a gap report,
// is accepted only from a token allowed to record that bridge (role
// recorder, and the bridge among the token's bridges when it lists any),
// and only when it is not dated ahead of the ledger's clock by more than
// ledger.MaxClockAhead. In open mode (no tokens) anyone may record, as
// anyone may write. Each refusal is counted by code
// (ledger_refused_total{path="http",code}).

// refuseRecorder answers a refused mark or gap report and counts it.
func (a *API) refuseRecorder(w http.ResponseWriter, status int, e *api.Error) {
	a.opts.Metrics.Refused(metrics.PathHTTP, e.Code)
	a.log.Warn().Str(logging.KeyCode, e.Code).Str("field", e.Field).Msg("refused a recorder's mark or gap report: " + e.Message)
	writeError(w, status, e)
}

// mayRecord checks that the request's token may speak for bridge; on
// false it has answered 403 not_recorder.
func (a *API) mayRecord(w http.ResponseWriter, r *http.Request, bridge, field string) bool {
	p, ok := httpauth.FromContext(r.Context())
	if !ok || p.MayRecord(bridge) {
		return true
	}
	msg := fmt.Sprintf("token %q may not speak for bridge %q (it needs the %s role", p.Name, bridge, httpauth.RoleRecorder)
	if len(p.Bridges) > 0 {
		msg += fmt.Sprintf(" with %q among its bridges, not only %q", bridge, p.Bridges)
	}
	a.refuseRecorder(w, http.StatusForbidden, &api.Error{Code: ledger.CodeNotRecorder, Field: field, Message: msg + ")"})
	return false
}

// checkAppendMark checks an append's Ledger-Bridge header (mark, "" for
// none): a mark that parses must come from a recorder of its bridge and
// not be dated ahead; an append without one needs the writer role. On
// false it has answered.
func (a *API) checkAppendMark(w http.ResponseWriter, r *http.Request, mark string) bool {
	if mark == "" {
		if p, ok := httpauth.FromContext(r.Context()); ok && !p.Has(httpauth.RoleWriter) {
			a.refuseRecorder(w, http.StatusForbidden, &api.Error{Code: ledger.CodeNotRecorder, Field: ledger.HeaderBridge,
				Message: fmt.Sprintf("token %q records bridges only: an append without a %s header needs the %s role", p.Name, ledger.HeaderBridge, httpauth.RoleWriter)})
			return false
		}
		return true
	}
	m, err := ledger.ParseBridgeMark(mark)
	if err != nil {
		e := ledger.WireError(err)
		a.opts.Metrics.Refused(metrics.PathHTTP, e.Code)
		writeError(w, http.StatusBadRequest, e)
		return false
	}
	if !a.mayRecord(w, r, m.Bridge, ledger.HeaderBridge) {
		return false
	}
	if err := ledger.CheckMarkClock(m, time.Now()); err != nil {
		a.refuseRecorder(w, http.StatusBadRequest, ledger.WireError(err))
		return false
	}
	return true
}

// checkGapReport checks a parsed gap report: from a recorder of its
// bridge, not dated ahead, not starting past the log's end. On false it
// has answered.
func (a *API) checkGapReport(w http.ResponseWriter, r *http.Request, g ledger.Gap) bool {
	if !a.mayRecord(w, r, g.Bridge, "bridge") {
		return false
	}
	last, err := a.opts.StreamSeq(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, &api.Error{Code: api.CodeUnavailable, Message: "reading the log's last sequence: " + err.Error()})
		return false
	}
	if err := ledger.CheckGapReport(g, time.Now(), last); err != nil {
		status := http.StatusBadRequest
		if r, ok := ledger.AsRefusal(err); ok && r.Code == ledger.CodeGapAhead {
			status = http.StatusConflict
		}
		a.refuseRecorder(w, status, ledger.WireError(err))
		return false
	}
	return true
}
