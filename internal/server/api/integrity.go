package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/integrity"
)

// The log checks itself (contract §16): a damaged log keeps answering
// reads, each marked with HeaderLogDamaged; an answer that meets the
// damage is 409 log_damaged naming it, never 500 internal.

// markDamaged sets HeaderLogDamaged on w while the log is damaged.
func (a *API) markDamaged(w http.ResponseWriter) {
	if a.opts.Integrity == nil {
		return
	}
	if d, ok := a.opts.Integrity.Current(); ok {
		w.Header().Set(api.HeaderLogDamaged, d.Message)
	}
}

// logDamaged answers 409 log_damaged when err met damage (an error
// wrapping an *integrity.DamagedError), and reports whether it did.
func (a *API) logDamaged(w http.ResponseWriter, err error) bool {
	d, ok := integrity.Damage(err)
	if !ok {
		return false
	}
	writeError(w, http.StatusConflict, damagedError(d))
	return true
}

func damagedError(d api.LogDamage) *api.Error {
	return &api.Error{Code: api.CodeLogDamaged, Field: "seq", Damage: &d,
		Message: fmt.Sprintf("%s (kind %s, seq %s)", d.Message, d.Kind, strconv.FormatUint(d.Seq, 10))}
}

// touches answers 409 log_damaged when an answer covering sequences
// from..to meets the damage in force, and reports whether it did.
func (a *API) touches(w http.ResponseWriter, from, to uint64) bool {
	if a.opts.Integrity == nil {
		return false
	}
	return a.logDamaged(w, a.opts.Integrity.Touches(from, to))
}
