package ledger

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mewledger/ledger/api"
)

// Type is the lifecycle event type of an envelope (contract §3). It is also the
// type token of the event's subject.
type Type string

// The lifecycle event types.
const (
	TypeProposal Type = "proposal"
	TypeWithdraw Type = "withdraw"
	TypeReject   Type = "reject"
	TypeFulfil   Type = "fulfil"
	TypeResponse Type = "response"
	TypeNote     Type = "note"
	TypeApprove  Type = "approve"
	TypeExpire   Type = "expire"
	// TypeGap is a recording gap of a bridge (ledger/gap, contract §3, §14):
	// written only by the ledger, it names the space, not a proposal.
	TypeGap Type = "gap"
	// TypeIgnored is the type of an envelope that is valid but not part of
	// the lifecycle (an mcp/request without correlation_id, a chat without
	// one, any other kind). Submit paths refuse it; the fold records it as
	// ignored.
	TypeIgnored Type = "ignored"
	// TypeInvalid is the subject type token used for nothing the ledger
	// writes; the fold uses it for events it cannot classify.
	TypeInvalid Type = "invalid"
)

// Types lists the lifecycle types in a fixed order.
var Types = []Type{TypeProposal, TypeWithdraw, TypeReject, TypeFulfil, TypeResponse, TypeNote, TypeApprove, TypeExpire, TypeGap}

// Valid reports whether t is one of the lifecycle types.
func (t Type) Valid() bool {
	for _, x := range Types {
		if t == x {
			return true
		}
	}
	return false
}

// Canonical kinds (MEW v0.4 spelling) that every dialect is normalised to.
const (
	KindProposal       = "mcp/proposal"
	KindWithdraw       = "mcp/withdraw"
	KindReject         = "mcp/reject"
	KindRequest        = "mcp/request"
	KindResponse       = "mcp/response"
	KindChat           = "chat"
	KindKernelProposal = "kernel/proposal"
	KindKernelApprove  = "kernel/approve"
	KindExpire         = "ledger/expire"
)

// Accepted dialects (the envelope's protocol field).
const (
	DialectMEW04  = "mew/v0.4"
	DialectMEW03  = "mew/v0.3"
	DialectMEUP02 = "meup/v0.2"
	DialectMEUP01 = "meup/v0.1"
	DialectMCPX01 = "mcpx/v0.1"
)

// Dialects lists the accepted protocol values.
var Dialects = []string{DialectMEW04, DialectMEW03, DialectMEUP02, DialectMEUP01, DialectMCPX01}

// LedgerSender is the from of envelopes the ledger writes itself (expiry,
// gaps).
const LedgerSender = "ledger"

// Envelope is the canonical (MEW v0.4) form of a lifecycle envelope after
// normalisation: Protocol is always "mew/v0.4" (the dialect as sent is
// Decoded.Dialect); Kind is the canonical kind without any mcpx
// ":METHOD[:CTX]" suffix; CorrelationID is always a de-duplicated list (mcpx
// payload ids are lifted into it). Payload is the payload as sent, except
// that an mcpx proposal or request whose method is only in its kind suffix
// gets that method added, so that the canonical form decodes again and the
// same proposal has one digest in every dialect. The stored bytes are never
// rewritten: this is a derived form.
type Envelope struct {
	Protocol      string          `json:"protocol"`
	ID            string          `json:"id"`
	TS            string          `json:"ts,omitempty"`
	From          string          `json:"from"`
	To            []string        `json:"to,omitempty"`
	Kind          string          `json:"kind"`
	CorrelationID []string        `json:"correlation_id,omitempty"`
	Context       string          `json:"context,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// Decoded is the result of decoding one envelope: the canonical envelope plus
// everything the fold and the append paths derive from it. All fields are
// computed by Decode; none require I/O.
type Decoded struct {
	Env Envelope
	// Dialect is the protocol the envelope was written in.
	Dialect string
	// OrigKind is the kind exactly as sent (e.g. "mcp/proposal:tools/call").
	OrigKind string
	// Type is the lifecycle type (TypeIgnored for valid non-lifecycle kinds).
	Type Type
	// Key is the correlation key of the subject: the envelope id for a
	// proposal (it names itself), else correlation_id[0], else the id.
	Key string
	// Targets are the ids the event refers to, de-duplicated, in order:
	// the proposal ids of a withdraw/reject/approve/expire, the proposal of a
	// fulfilment, the fulfilment of a response, the entry a note explains.
	// Empty for a proposal.
	Targets []string
	// Method and Params are payload.method and payload.params of a proposal
	// or fulfilment (Method falls back to the mcpx kind suffix). Params is
	// nil when absent.
	Method string
	Params json.RawMessage
	// Reason is payload.reason of a withdraw, reject or approve, as given.
	Reason string
	// Text is the chat text (payload.text, or payload.message in ADR drafts).
	Text string
	// TTLms is payload.ttl_ms of a proposal, 0 when absent.
	TTLms int64
	// Outcome of a response: "succeeded" (payload.result) or "failed"
	// (payload.error, or an MCP tool error: payload.result.isError true);
	// empty when neither is present.
	Outcome string
	// Digest is the hex SHA-256 of the canonical JSON of the normalised
	// envelope without ts and protocol. Two envelopes with the same id and
	// digest are the same event.
	Digest string
	// Kernel is the typed kernel proposal of a kernel/proposal envelope.
	Kernel *KernelProposal
	// Gap is the payload of a ledger/gap envelope (TypeGap); Key is its
	// Bridge.
	Gap *Gap
	// Form names which of the seeds' lifecycle forms the envelope is
	// (contract §2; Form* constants, e.g. "meup.lifecycle/status"); "" for the
	// kinds of the dialect table.
	Form string
	// Note is what a form folded as a note carries (status, acceptance,
	// deferral, bid, other operation); nil for a plain chat.
	Note *Note
	// TargetSources are a proposal's targets: its to and the seeds'
	// targeting fields, each with the field naming it, in that order (an
	// id named by several fields appears once per field).
	TargetSources []TargetSource
	// Targeting is a proposal's payload.targeting (nil when absent).
	Targeting *Targeting
}

// MsgID returns the Nats-Msg-Id of the event in a space (contract §4):
// <space>/<envelope id>/<digest>.
func (d *Decoded) MsgID(space string) string {
	return space + "/" + d.Env.ID + "/" + d.Digest
}

// The refusal codes (api.CodeNotJSON, ...) are in the api package with
// every other code of the error object.

// ErrRefused is the sentinel every *RefusalError matches with errors.Is.
var ErrRefused = errors.New("ledger: envelope refused")

// RefusalError is a specific reason an envelope is refused. Code is one of
// the Code* constants or a kernel rule id ("V-PROP-004"); Field names the
// offending field as a JSON path ("payload.method", "to[3]") when there is
// one.
//
// It is the wire's error object (api.Error) as a Go error of this
// package: (*api.Error)(r) is what the API answers.
type RefusalError api.Error

func (e *RefusalError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("ledger: %s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("ledger: %s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRefused) true for every refusal.
func (e *RefusalError) Is(target error) bool { return target == ErrRefused }

func refuse(code, field, format string, args ...any) *RefusalError {
	return &RefusalError{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// AsRefusal returns the *RefusalError in err's chain, if any.
func AsRefusal(err error) (*RefusalError, bool) {
	var r *RefusalError
	ok := errors.As(err, &r)
	return r, ok
}
