package ledger

import (
	"errors"

	"github.com/mewledger/ledger/api"
)

// WireError maps an append error to the wire: a refusal keeps its code,
// message and field; anything else (not acknowledged) is unavailable.
func WireError(err error) *api.Error {
	if r, ok := AsRefusal(err); ok {
		e := api.Error(*r)
		return &e
	}
	if errors.Is(err, ErrPublish) {
		return &api.Error{Code: api.CodeUnavailable, Message: "the envelope was not acknowledged by the stream; appending it again is safe: " + err.Error()}
	}
	return &api.Error{Code: api.CodeInternal, Message: err.Error()}
}

// WireResult converts an Appender result to its answer on the wire.
func WireResult(r Result) api.AppendResult {
	if r.Err != nil {
		return api.AppendResult{Error: WireError(r.Err)}
	}
	return api.AppendResult{ID: r.ID, Seq: r.Seq, Duplicate: r.Duplicate}
}
