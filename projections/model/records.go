// Package model holds the ledger's records as the projection keeps them and
// the API serves them: a proposal and its parts, one history entry, a
// space's statistics. It imports nothing of Pebble or NATS, so that
// clients (package client) and the pure fold can use the types without
// the store.
package model

import (
	"encoding/json"
	"slices"
	"time"
)

// AnomalyNames lists every anomaly the fold raises (the Anomaly*
// constants), in the order of SPEC §5 and §12. The API's anomaly filter
// and the statistics accept exactly these; a test checks that the list
// names every constant, so a new anomaly cannot be left out.
var AnomalyNames = []string{
	AnomalyIDConflict,
	AnomalyUnauthorizedWithdraw,
	AnomalyMultipleFulfillments,
	AnomalyFulfilledAfterWithdrawn,
	AnomalyFulfilledAfterRejected,
	AnomalyFulfilledAfterExpired,
	AnomalyFulfillmentMismatch,
	AnomalyTargetMismatch,
	AnomalySelfFulfilled,
	AnomalyUnapprovedFulfillment,
	AnomalyFulfilledBeforeWindow,
}

// ProposalState is the lifecycle state of a proposal (SPEC §5.1).
type ProposalState string

// The proposal states. Every state but pending is terminal.
const (
	StatePending   ProposalState = "pending"
	StateFulfilled ProposalState = "fulfilled"
	StateWithdrawn ProposalState = "withdrawn"
	StateRejected  ProposalState = "rejected"
	StateExpired   ProposalState = "expired"
)

// States lists the states in a fixed order.
var States = []ProposalState{StatePending, StateFulfilled, StateWithdrawn, StateRejected, StateExpired}

// Effect is what one event did to one proposal (SPEC §5).
type Effect string

// The effects.
const (
	EffectApplied      Effect = "applied"
	EffectRecorded     Effect = "recorded"
	EffectDuplicate    Effect = "duplicate"
	EffectLate         Effect = "late"
	EffectUnauthorized Effect = "unauthorized"
	EffectInvalid      Effect = "invalid"
	EffectOrphan       Effect = "orphan"
	EffectIgnored      Effect = "ignored"
)

// Anomalies an auditor hunts for (SPEC §5.2, §5.3, §12).
const (
	AnomalyIDConflict              = "id_conflict"
	AnomalyUnauthorizedWithdraw    = "unauthorized_withdraw"
	AnomalyMultipleFulfillments    = "multiple_fulfillments"
	AnomalyFulfilledAfterWithdrawn = "fulfilled_after_withdrawn"
	AnomalyFulfilledAfterRejected  = "fulfilled_after_rejected"
	AnomalyFulfilledAfterExpired   = "fulfilled_after_expired"
	AnomalyFulfillmentMismatch     = "fulfillment_mismatch"
	AnomalyTargetMismatch          = "target_mismatch"
	AnomalySelfFulfilled           = "self_fulfilled"
	AnomalyUnapprovedFulfillment   = "unapproved_fulfillment"
	AnomalyFulfilledBeforeWindow   = "fulfilled_before_window"
)

// Rejection is one rejection of a proposal, kept whatever its effect.
type Rejection struct {
	Event       string `json:"event"`
	Seq         uint64 `json:"seq"`
	From        string `json:"from"`
	Reason      string `json:"reason"`
	Explanation string `json:"explanation,omitempty"`
	Late        bool   `json:"late"`
}

// Withdrawal is the withdrawal that decided a proposal.
type Withdrawal struct {
	Event       string `json:"event"`
	Seq         uint64 `json:"seq"`
	From        string `json:"from"`
	Reason      string `json:"reason"`
	Explanation string `json:"explanation,omitempty"`
}

// Fulfillment is one fulfilment (mcp/request with correlation) of a
// proposal. Outcome is "", "succeeded" or "failed" (SPEC §5.4).
type Fulfillment struct {
	Event     string   `json:"event"`
	Seq       uint64   `json:"seq"`
	From      string   `json:"from"`
	Late      bool     `json:"late"`
	Outcome   string   `json:"outcome,omitempty"`
	Response  string   `json:"response,omitempty"`
	Anomalies []string `json:"anomalies,omitempty"`
}

// Approval is one kernel/approve event applied to a kernel proposal (SPEC
// §12), kept whatever its effect. Counted is whether it counts toward the
// approval class; when it does not, Why says why (self-approval, not a
// listed approver, already approved by the same approver, no approval
// needed, or Late: the proposal had already left pending).
type Approval struct {
	Event   string `json:"event"`
	Seq     uint64 `json:"seq"`
	From    string `json:"from"`
	Reason  string `json:"reason,omitempty"`
	Counted bool   `json:"counted"`
	Late    bool   `json:"late,omitempty"`
	Why     string `json:"why,omitempty"`
}

// Kernel forms (Kernel.Form).
const (
	KernelFormProposal = "proposal"       // the payload was a typed Proposal
	KernelFormRequest  = "kernel_request" // the payload was an older KernelRequest, mapped
)

// Kernel is the kernel-proposal part of a proposal record (SPEC §12): what
// the typed proposal asks for and where its approval stands. Required is
// the number of distinct approvals its class needs (0 for none), Approvers
// the listed approvers (empty: anyone but the proposer), Counted the
// approvals counted so far; the proposal's Approved turns true when Counted
// reaches Required.
type Kernel struct {
	ActionType    ActionType    `json:"action_type"`
	Target        *KernelTarget `json:"target,omitempty"`
	ApprovalClass ApprovalClass `json:"approval_class"`
	Required      int           `json:"approvals_required"`
	Approvers     []string      `json:"approvers,omitempty"`
	Counted       int           `json:"approvals_counted"`
	ValidFromMs   int64         `json:"valid_from_ms,omitempty"`
	ValidUntilMs  int64         `json:"valid_until_ms,omitempty"`
	// Form is KernelFormProposal or KernelFormRequest; Intent is a mapped
	// KernelRequest's free-text intent (the Proposal has no such member).
	Form   string `json:"form"`
	Intent string `json:"intent,omitempty"`
}

// Proposal is the projected state of one proposal: the SPEC §7 proposal
// object. The JSON names of the SPEC are fixed; the others are additions.
type Proposal struct {
	ID           string          `json:"id"`
	Space        string          `json:"space"`
	State        ProposalState   `json:"state"`
	Proposer     string          `json:"proposer"`
	To           []string        `json:"to"`
	Method       string          `json:"method"`
	Params       json.RawMessage `json:"params"`
	Dialect      string          `json:"dialect"`
	Kind         string          `json:"kind"`
	Context      string          `json:"context,omitempty"`
	CreatedSeq   uint64          `json:"created_seq"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedSeq   uint64          `json:"updated_seq"`
	UpdatedAt    time.Time       `json:"updated_at"`
	DecidedBy    string          `json:"decided_by"`
	DecidedEvent string          `json:"decided_event"`
	DecidedSeq   uint64          `json:"decided_seq,omitempty"`
	Reason       string          `json:"reason"`
	Rejections   []Rejection     `json:"rejections"`
	Fulfillments []Fulfillment   `json:"fulfillments"`
	Withdrawal   *Withdrawal     `json:"withdrawal,omitempty"`
	Anomalies    []string        `json:"anomalies"`
	Events       int             `json:"events"`
	ExpiresAt    *time.Time      `json:"expires_at,omitempty"`
	Digest       string          `json:"digest"`
	Kernel       *Kernel         `json:"kernel,omitempty"`
	Approvals    []Approval      `json:"approvals,omitempty"`
	Approved     *bool           `json:"approved,omitempty"`
}

// HasAnomaly reports whether the proposal carries anomaly a.
func (p *Proposal) HasAnomaly(a string) bool {
	for _, x := range p.Anomalies {
		if x == a {
			return true
		}
	}
	return false
}

// Terminal reports whether the proposal has left pending.
func (p *Proposal) Terminal() bool { return p.State != StatePending }

// Clone returns a deep copy (slices are copied; RawMessages are shared and
// never mutated).
func (p *Proposal) Clone() *Proposal {
	// slices.Clone keeps an empty slice empty (not nil), so the API shows
	// [] rather than null for the lists SPEC §7 defines as arrays.
	c := *p
	c.To = slices.Clone(p.To)
	c.Rejections = slices.Clone(p.Rejections)
	c.Fulfillments = slices.Clone(p.Fulfillments)
	for i := range c.Fulfillments {
		c.Fulfillments[i].Anomalies = slices.Clone(c.Fulfillments[i].Anomalies)
	}
	if p.Withdrawal != nil {
		w := *p.Withdrawal
		c.Withdrawal = &w
	}
	c.Anomalies = slices.Clone(p.Anomalies)
	if p.ExpiresAt != nil {
		t := *p.ExpiresAt
		c.ExpiresAt = &t
	}
	if p.Kernel != nil {
		k := *p.Kernel
		k.Approvers = slices.Clone(p.Kernel.Approvers)
		c.Kernel = &k
	}
	c.Approvals = slices.Clone(p.Approvals)
	if p.Approved != nil {
		b := *p.Approved
		c.Approved = &b
	}
	return &c
}

// HistoryEntry is one event's effect on one proposal (or, for events that
// name no proposal that exists, on the key they were filed under). Entries of
// a key are ordered by Seq.
type HistoryEntry struct {
	Seq  uint64    `json:"seq"`
	ID   string    `json:"id"`
	Type string    `json:"type"`
	Kind string    `json:"kind"`
	From string    `json:"from"`
	At   time.Time `json:"at"`
	// Effect is what the event did here.
	Effect Effect `json:"effect"`
	// Reason is the event's own reason code (withdraw, reject, approve).
	Reason string `json:"reason,omitempty"`
	// Code is the refusal code of an invalid event.
	Code string `json:"code,omitempty"`
	// Detail says, for a person, why the effect is what it is.
	Detail string `json:"detail,omitempty"`
	// Anomalies raised by this event.
	Anomalies []string `json:"anomalies,omitempty"`
	// Target is the id the event names when it is not the proposal itself
	// (a response's fulfilment, a note's rejection).
	Target string `json:"target,omitempty"`
	// Text is a note's text; Outcome a response's outcome.
	Text    string `json:"text,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// ResolvedSeq is the sequence of the event whose arrival released this
	// one from orphan; zero when it was never an orphan.
	ResolvedSeq uint64 `json:"resolved_seq,omitempty"`
}

// Stats are the per-space counters of SPEC §7 /v1/stats.
type Stats struct {
	Proposals         int64            `json:"proposals"`
	ByState           map[string]int64 `json:"by_state"`
	RejectionReasons  map[string]int64 `json:"rejection_reasons"`
	WithdrawalReasons map[string]int64 `json:"withdrawal_reasons"`
	Anomalies         map[string]int64 `json:"anomalies"`
	Events            int64            `json:"events"`
	EventsByType      map[string]int64 `json:"events_by_type"`
	Effects           map[string]int64 `json:"effects"`
	OrphansWaiting    int64            `json:"orphans_waiting"`
}

// NewStats returns zeroed stats with every known key present, so that the
// JSON shape does not depend on what happened.
func NewStats() *Stats {
	s := &Stats{
		ByState:           map[string]int64{},
		RejectionReasons:  map[string]int64{},
		WithdrawalReasons: map[string]int64{},
		Anomalies:         map[string]int64{},
		EventsByType:      map[string]int64{},
		Effects:           map[string]int64{},
	}
	for _, st := range States {
		s.ByState[string(st)] = 0
	}
	return s
}

// Clone returns a deep copy.
func (s *Stats) Clone() *Stats {
	c := *s
	cp := func(m map[string]int64) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	c.ByState, c.RejectionReasons, c.WithdrawalReasons = cp(s.ByState), cp(s.RejectionReasons), cp(s.WithdrawalReasons)
	c.Anomalies, c.EventsByType, c.Effects = cp(s.Anomalies), cp(s.EventsByType), cp(s.Effects)
	return &c
}
