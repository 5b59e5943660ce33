package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Errors a call may wrap or match (see Error.Is).
var (
	// ErrOptions is wrapped by Options.Validate errors.
	ErrOptions = errors.New("client: invalid options")
	// ErrUnreachable is wrapped when no ledger answered at all.
	ErrUnreachable = errors.New("client: ledger unreachable")
	// ErrRefused matches an *Error refusing an envelope or a query (HTTP
	// 400 or 413): the request is wrong, sending it again will not help.
	ErrRefused = errors.New("client: refused")
	// ErrNotFound matches an *Error for a proposal or route that does not
	// exist (404).
	ErrNotFound = errors.New("client: not found")
	// ErrUnauthorized matches a missing or unknown token (401),
	// ErrForbidden a token without the role (403).
	ErrUnauthorized = errors.New("client: unauthorized")
	ErrForbidden    = errors.New("client: forbidden")
	// ErrRateLimited matches an append over the write limit (429); retry
	// after Error.RetryAfter.
	ErrRateLimited = errors.New("client: rate limited")
	// ErrUnavailable matches an answer that may succeed later (503): a
	// valid envelope the stream did not acknowledge (sending it again is
	// safe), or a read whose min_seq was not reached in time.
	ErrUnavailable = errors.New("client: unavailable")
)

// Error is an answer of the ledger that says no. Code is the ledger's
// stable code (a refusal code such as "missing_field", a kernel rule id
// such as "V-PROP-004", "not_found", "unauthorized", ...), Field the
// member or parameter at fault ("" when none), Line the NDJSON line an
// append result is about (0 otherwise).
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
	Line    int    `json:"-"`
	// RetryAfter is the server's Retry-After of a 429 or 503, zero when
	// it gave none.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Line > 0 {
		s = "line " + strconv.Itoa(e.Line) + ": " + s
	}
	return s
}

// Is matches the sentinels of this package by HTTP status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrRefused:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	}
	return false
}

// errorFrom reads an error answer of the API.
func errorFrom(status int, body []byte, api string) *Error {
	var eb struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		eb.Error.Status = status
		return eb.Error
	}
	return &Error{Status: status, Code: "http_" + strconv.Itoa(status),
		Message: fmt.Sprintf("unexpected answer from %s (is it a ledger?): %.200s", api, body)}
}
