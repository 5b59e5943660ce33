package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Error codes of the API and the submit service, besides the refusal codes
// of the ledger package (ledger.Code*), which are passed through as they
// are.
const (
	CodeNotFound         = "not_found"          // no such proposal / history / route
	CodeBadQuery         = "bad_query"          // a query parameter has a bad value
	CodeUnknownParameter = "unknown_parameter"  // a query parameter the route does not take
	CodeNotCaughtUp      = "not_caught_up"      // min_seq not applied within the bound
	CodeNotReady         = "not_ready"          // /readyz: the projection lags too far
	CodeUnavailable      = "unavailable"        // NATS or the stream did not answer; retry
	CodeStorageFull      = "storage_full"       // the disk is full: nothing is appended until space is freed
	CodeMethodNotAllowed = "method_not_allowed" // route exists, method does not
	CodeShuttingDown     = "shutting_down"      // the service is stopping; retry elsewhere
	CodeInternal         = "internal"           // a bug or a storage failure; see the server log
	CodeBadRequest       = "bad_request"        // the request itself is malformed (not an envelope)
)

// Error is the error object of every answer that says no:
// {"code":..,"message":..,"field":..}. Code is stable (one of the Code*
// constants, a refusal code, or a kernel rule id such as "V-PROP-004");
// Field is the member or parameter at fault, always present ("" when
// none). The server writes it; the client returns it as the error of a
// call, with Status (the HTTP status), Line (the NDJSON line an append
// result is about) and RetryAfter (the server's Retry-After) filled in.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
	// Damage, with CodeLogDamaged, is the damage in the log the answer
	// met (contract §16).
	Damage *LogDamage `json:"damage,omitempty"`

	Status     int           `json:"-"`
	Line       int           `json:"-"`
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

// Sentinels an *Error matches with errors.Is, by its HTTP Status (set on
// the client side).
var (
	// ErrRefused: the envelope or query is wrong (400, 413); sending it
	// again will not help.
	ErrRefused = errors.New("refused")
	// ErrNotFound: no such proposal, event or route (404).
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: a missing or unknown token (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: a token without the role or space (403).
	ErrForbidden = errors.New("forbidden")
	// ErrConflict: the answer contradicts the state of the ledger (409),
	// e.g. a damaged log or a rebuild already running.
	ErrConflict = errors.New("conflict")
	// ErrRateLimited: over a limit (429); retry after RetryAfter.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: may succeed later (503): a valid envelope the stream
	// did not acknowledge (sending it again is safe), or a read whose
	// min_seq was not reached in time.
	ErrUnavailable = errors.New("unavailable")
)

// Is matches the sentinels above by Status.
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
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	}
	return false
}

// ErrorBody is every error response: {"error":{...}}.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Refusal codes of an appended envelope (package ledger). They are
// stable: clients and dashboards match on them.
const (
	CodeNotJSON            = "not_json"            // body is not a JSON object
	CodeInvalidUTF8        = "invalid_utf8"        // bytes are not valid UTF-8
	CodeOversize           = "oversize"            // envelope over the size limit
	CodeUnknownProtocol    = "unknown_protocol"    // protocol not an accepted dialect
	CodeMissingField       = "missing_field"       // a required field is absent or empty
	CodeWrongType          = "wrong_type"          // a field has the wrong JSON type
	CodeTooLong            = "too_long"            // an id, from, to entry or token over its limit
	CodeTooMany            = "too_many"            // too many to / correlation_id entries
	CodeBadValue           = "bad_value"           // a field's value is malformed (ts, ttl_ms, ...)
	CodeNotLifecycle       = "not_lifecycle"       // kind not part of the proposal lifecycle
	CodeMissingCorrelation = "missing_correlation" // lifecycle event without correlation_id
	CodeReservedKind       = "reserved_kind"       // kind only the ledger itself may write
	CodeDialectMismatch    = "dialect_mismatch"    // kind spelled in another dialect's form
	CodeReservedID         = "reserved_id"         // id in a namespace only the ledger writes (expire:, gap:)
	CodeReservedSender     = "reserved_sender"     // from is the ledger's own sender name
)

// CodeUnknownField refuses a member that is not part of the kernel schema
// (at the top level of a Proposal or KernelRequest, or inside one of its
// schema-defined objects): the kernel fails closed rather than ignore what
// it does not understand.
const CodeUnknownField = "unknown_field"

// Codes of the HTTP layer: authentication, limits, origin checks, the
// proof and operations routes.
const (
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeRateLimited      = "rate_limited"
	CodeRebuildFailed    = "rebuild_failed"    // POST /v1/ops/rebuild?wait=true: the rebuild failed
	CodeNoCheckpoint     = "no_checkpoint"     // no signed checkpoint covers what was asked yet (retry after the checkpoint interval)
	CodeBeyondTree       = "beyond_tree"       // a size past the tree
	CodeEntryTooLong     = "entry_too_long"    // an entry bundle holds a leaf over 65,535 bytes: ask with ?framing=long
	CodeTooManyStreams   = "too_many_streams"  // a stream (watch, long poll) refused over a cap
	CodeTooManyHolds     = "too_many_holds"    // a request waiting on its body or a min_seq wait, over the caller's or the server's share
	CodeTooManySessions  = "too_many_sessions" // an MCP session over the caller's or the server's cap
	CodeSessionNotFound  = "session_not_found" // an MCP session id the caller does not hold
	CodeBadHost          = "bad_host"
	CodeCrossOrigin      = "cross_origin"
	CodeUnsupportedMedia = "unsupported_media_type"
)
