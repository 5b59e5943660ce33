package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mewledger/ledger/api"
)

// Errors a call may wrap. An answer of the ledger that says no is an
// *api.Error (with Status, Line and RetryAfter set): match it with
// errors.As, or with errors.Is and api's sentinels (api.ErrNotFound,
// api.ErrRefused, api.ErrUnavailable, ...).
var (
	// ErrOptions is wrapped by Options.Validate errors.
	ErrOptions = errors.New("invalid options")
	// ErrUnreachable is wrapped when no ledger answered at all.
	ErrUnreachable = errors.New("ledger unreachable")
)

// errorFrom reads an error answer of the API.
func errorFrom(status int, body []byte, apiURL string) *api.Error {
	var eb api.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		eb.Error.Status = status
		return eb.Error
	}
	return &api.Error{Status: status, Code: "http_" + strconv.Itoa(status),
		Message: fmt.Sprintf("unexpected answer from %s (is it a ledger?): %.200s", apiURL, body)}
}
