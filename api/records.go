package api

// The records, as the projection keeps them and the API serves them: a
// proposal and its parts, one history entry, a space's statistics.

import (
	"encoding/json"
	"slices"
	"time"
)

// AnomalyNames lists every anomaly the fold raises (the Anomaly*
// constants), in the order of contract §5 and §12. The API's anomaly filter
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
	AnomalyIDReused,
	AnomalyMsgIDClash,
	AnomalyExclusiveViolation,
}

// ProposalState is the lifecycle state of a proposal (contract §5.1).
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

// Effect is what one event did to one proposal (contract §5).
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

// Anomalies an auditor hunts for (contract §5.2, §5.3, §12).
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
	// AnomalyIDReused: an event on the proposal reused an id an earlier,
	// different event had (contract §5.2); it was folded on its own merits.
	AnomalyIDReused = "id_reused"
	// AnomalyMsgIDClash: an event on the proposal was stored under a
	// derived Nats-Msg-Id because another message held its own with
	// different bytes (contract §4, header Ledger-Msg-Id-Clash).
	AnomalyMsgIDClash = "msg_id_clash"
	// AnomalyExclusiveViolation: a fulfilment that does not honour the
	// proposal's exclusive targeting (neither its from is a target nor its
	// to names one) inside the exclusive window, or at any time when
	// fallback_to_broadcast is false (contract §2).
	AnomalyExclusiveViolation = "exclusive_violation"
)

// Target is one participant a proposal targets (contract §2): named by its to
// or by the seeds' targeting fields; Sources lists every field that names
// it ("to", "fulfiller", "preferred", "preferred_participant",
// "preferred_fulfillers", "targeting.preferred"), in that order.
type Target struct {
	ID      string   `json:"id"`
	Sources []string `json:"sources"`
}

// ExclusiveWindow is a proposal's payload.targeting with exclusive: true.
// Until (exclusive, stream time) ends the window; nil when no
// exclusive_timeout / fallback_timeout was given (the window never ends).
// With FallbackToBroadcast false only a target may fulfil at any time.
type ExclusiveWindow struct {
	Until               *time.Time `json:"until,omitempty"`
	TimeoutMs           int64      `json:"timeout_ms,omitempty"`
	FallbackToBroadcast bool       `json:"fallback_to_broadcast"`
	QuickReject         bool       `json:"quick_reject,omitempty"`
}

// ParticipantStatus is a participant's latest status on a proposal
// (meup.lifecycle status, ADR-v2c option 8): considering, queued,
// processing or unable, from the event Event.
type ParticipantStatus struct {
	From   string `json:"from"`
	Status string `json:"status"`
	Event  string `json:"event"`
	Seq    uint64 `json:"seq"`
}

// FormNote is one acceptance, deferral or bid on a proposal (contract §2),
// kept whatever its effect; Late when the proposal had left pending.
type FormNote struct {
	Event         string   `json:"event"`
	Seq           uint64   `json:"seq"`
	From          string   `json:"from"`
	Form          string   `json:"form"`
	Reason        string   `json:"reason,omitempty"`
	Confidence    *float64 `json:"confidence,omitempty"`
	EstimatedTime *float64 `json:"estimated_time,omitempty"`
	Late          bool     `json:"late,omitempty"`
}

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
// proposal. Outcome is "", "succeeded" or "failed" (contract §5.4), taken from
// the response named by Response, chosen among Responses by the rule of
// contract §5.4 (see pickOutcome). To is the fulfilment's own to.
type Fulfillment struct {
	Event     string     `json:"event"`
	Seq       uint64     `json:"seq"`
	From      string     `json:"from"`
	Late      bool       `json:"late"`
	Outcome   string     `json:"outcome,omitempty"`
	Response  string     `json:"response,omitempty"`
	Anomalies []string   `json:"anomalies,omitempty"`
	To        []string   `json:"to,omitempty"`
	Responses []Response `json:"responses,omitempty"`
}

// Response is one mcp/response to a fulfilment, kept in stream order.
// Outcome is "" when it carries neither result nor error.
type Response struct {
	Event   string `json:"event"`
	Seq     uint64 `json:"seq"`
	From    string `json:"from"`
	Outcome string `json:"outcome,omitempty"`
}

// Approval is one kernel/approve event applied to a kernel proposal (contract
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

// Kernel is the kernel-proposal part of a proposal record (contract §12): what
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

// Proposal is the projected state of one proposal: the contract §7 proposal
// object. The JSON names of the contract are fixed; the others are additions.
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
	// What the seeds' lifecycle forms add (contract §2): the targets (to and
	// the targeting fields), the exclusive window, each participant's
	// latest status, acceptances, deferrals, bids, and the forms of the
	// events folded into the proposal (the list filter form).
	Targets     []Target            `json:"targets,omitempty"`
	Exclusive   *ExclusiveWindow    `json:"exclusive,omitempty"`
	Statuses    []ParticipantStatus `json:"statuses,omitempty"`
	Acceptances []FormNote          `json:"acceptances,omitempty"`
	Deferrals   []FormNote          `json:"deferrals,omitempty"`
	Bids        []FormNote          `json:"bids,omitempty"`
	Forms       []string            `json:"forms,omitempty"`
	// HoleCrossing is set by the read routes, never stored: the recording
	// holes the proposal's lifecycle crosses (see HoleCrossing), absent
	// when it crosses none.
	HoleCrossing *HoleCrossing `json:"hole_crossing,omitempty"`
}

// HasFormFields reports whether p carries any of the rarer fields of the
// seeds' forms (the fast encoder leaves them to json.Marshal; Targets, which
// every proposal with a to has, it encodes itself).
func (p *Proposal) HasFormFields() bool {
	return p.Exclusive != nil || len(p.Statuses) > 0 || len(p.Acceptances) > 0 ||
		len(p.Deferrals) > 0 || len(p.Bids) > 0 || len(p.Forms) > 0
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
	// [] rather than null for the lists contract §7 defines as arrays.
	c := *p
	c.To = slices.Clone(p.To)
	c.Rejections = slices.Clone(p.Rejections)
	c.Fulfillments = slices.Clone(p.Fulfillments)
	for i := range c.Fulfillments {
		c.Fulfillments[i].Anomalies = slices.Clone(c.Fulfillments[i].Anomalies)
		// To is never changed after the fulfilment is folded, and
		// Responses only grows through an append on a clipped slice
		// (a new array): both are shared.
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
	// A target's Sources are set when the proposal is created and never
	// changed: shared.
	c.Targets = slices.Clone(p.Targets)
	if p.Exclusive != nil {
		x := *p.Exclusive
		c.Exclusive = &x
	}
	c.Statuses = slices.Clone(p.Statuses)
	c.Acceptances = slices.Clone(p.Acceptances)
	c.Deferrals = slices.Clone(p.Deferrals)
	c.Bids = slices.Clone(p.Bids)
	c.Forms = slices.Clone(p.Forms)
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
	// Form is which of the seeds' lifecycle forms the event is (contract §2,
	// e.g. "meup.lifecycle/status"); Note its note kind (status, accept,
	// defer, bid, or a meup.lifecycle operation as given) and Status its
	// status value as given.
	Form   string `json:"form,omitempty"`
	Note   string `json:"note,omitempty"`
	Status string `json:"status,omitempty"`
}

// Gap is one recording gap of a bridge (contract §3, §14), as the fold keeps it
// per space in stream order: the ledger/gap event's sequence, stream time
// and id, and its payload. ReconnectedAt is nil when the bridge wrote the gap
// while still disconnected (on shutdown). The window is from LastSeq
// (LastEnvelope, received at DisconnectedAt) to the first envelope stored
// from the bridge after Seq.
type Gap struct {
	Seq            uint64     `json:"seq"`
	At             time.Time  `json:"at"`
	ID             string     `json:"id"`
	Bridge         string     `json:"bridge"`
	MEWSpace       string     `json:"mew_space"`
	Gateway        string     `json:"gateway"`
	LastEnvelope   string     `json:"last_envelope"`
	LastSeq        uint64     `json:"last_seq,omitempty"`
	DisconnectedAt time.Time  `json:"disconnected_at"`
	ReconnectedAt  *time.Time `json:"reconnected_at"`
	NoticedAt      *time.Time `json:"noticed_at,omitempty"`
	Reason         string     `json:"reason"`
	Session        string     `json:"session,omitempty"`
	Dropped        int        `json:"dropped,omitempty"`
	// EndSeq and EndEnvelope are the window's end: the first envelope
	// the ledger stored from the bridge after the gap (0 and "" while
	// the window is open). The fold sets them (see holes.go).
	EndSeq      uint64 `json:"end_seq,omitempty"`
	EndEnvelope string `json:"end_envelope,omitempty"`
	// StartSeq is where the fold places the window's start in the log:
	// LastSeq for a live bridge; for a --history follower, the last
	// envelope it was answered duplicate (what it stored itself sits at
	// the log's end, not where the space carried it), 0 when none.
	StartSeq *uint64 `json:"start_seq,omitempty"`
	// Covered says that other recorders of the MEW space (or another
	// session of this one) recorded the whole window, CoveredBy names
	// them (contract §14 "Several recorders"). Worked out when read,
	// from what the fold keeps; never stored as true.
	Covered   bool     `json:"covered"`
	CoveredBy []string `json:"covered_by,omitempty"`
}

// Bridge session states (BridgeSession.State).
const (
	// BridgeRecording: the latest the log holds of the bridge is an
	// envelope it stored; if its session is not the bridge's current one,
	// that session ended without recording its hole (killed bridge,
	// killed ledger, lost machine).
	BridgeRecording = "recording"
	// BridgeGap: a gap of the bridge covers everything since its last
	// stored envelope (it stopped cleanly, or its hole is on the record).
	BridgeGap = "gap"
)

// BridgeSession is what the ledger knows of one bridge recording a MEW
// space into a ledger space (contract §14), derived by the fold from the
// log: the envelopes stored with a HeaderBridge mark, and the bridge's
// ledger/gap events.
type BridgeSession struct {
	Bridge   string `json:"bridge"`
	MEWSpace string `json:"mew_space"`
	// Session is the session of the latest envelope stored from the
	// bridge (or of its latest gap).
	Session string `json:"session"`
	// State is BridgeRecording or BridgeGap.
	State string `json:"state"`
	// LastEnvelope, LastSeq, LastReceivedAt and LastStoredAt are the last
	// envelope stored from the bridge: its id, sequence, when the bridge
	// received it (its batch's first envelope), and the stream's time.
	LastEnvelope   string     `json:"last_envelope,omitempty"`
	LastSeq        uint64     `json:"last_seq,omitempty"`
	LastReceivedAt *time.Time `json:"last_received_at,omitempty"`
	LastStoredAt   *time.Time `json:"last_stored_at,omitempty"`
	// GapSeq is the sequence of the gap that covers everything since
	// LastSeq (state BridgeGap).
	GapSeq uint64 `json:"gap_seq,omitempty"`
	// Envelopes counts the messages stored with the bridge's mark; Gaps
	// its gaps.
	Envelopes int64 `json:"envelopes"`
	Gaps      int64 `json:"gaps"`
	// Duplicates counts the envelopes the bridge sent again and the
	// ledger answered as duplicates (stored once, by whichever recorder
	// came first), as its marks report them (BridgeMark.Dups);
	// SessionDuplicates is the count the current session reported last.
	Duplicates        int64 `json:"duplicates"`
	SessionDuplicates int64 `json:"session_duplicates,omitempty"`
	// Run is what the current session has recorded since its last gap
	// (nil: nothing yet); OpenGaps are the sequences of the bridge's
	// gaps whose window has not ended (no envelope stored since).
	Run      *RecorderRun `json:"run,omitempty"`
	OpenGaps []uint64     `json:"open_gaps,omitempty"`
	// History: the latest session follows the gateway's log file
	// (BridgeMark.History).
	History bool `json:"history,omitempty"`
}

// Stats are the per-space counters of contract §7 /v1/stats.
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
	// Gaps counts the recording gaps of bridges in the space (contract §14).
	Gaps int64 `json:"gaps"`
	// Holes counts the space's holes (windows no recorder recorded) and
	// CoveredGaps the gaps other recorders covered (contract §14 "Several
	// recorders"): worked out when read, never stored.
	Holes       int64 `json:"holes"`
	CoveredGaps int64 `json:"covered_gaps"`
	// MarksIgnored counts the bridge marks (Ledger-Bridge headers) the
	// fold did not honour (contract §14): unsealed or badly sealed (not
	// appended through the ledger's own append path, e.g. published
	// straight onto the stream), or on a repeat of a stored envelope.
	MarksIgnored int64 `json:"marks_ignored"`
	// NoteKinds counts the notes of the seeds' lifecycle forms folded on
	// proposals, by kind: status, accept, defer, bid, the meup.lifecycle
	// operations ADR-v2c names, and "other" for anything else.
	NoteKinds map[string]int64 `json:"note_kinds"`
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
		NoteKinds:         map[string]int64{},
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
	c.NoteKinds = cp(s.NoteKinds)
	return &c
}

// Change is one change of a proposal's state or anomalies: what /v1/watch
// streams. PrevState is empty when the change created the proposal; Added
// are the anomalies the change raised. Event is the event that decided
// the proposal when the change left pending (DecidedBy its sender), the
// proposal itself when the change created it pending, else empty: the
// proposal's history says which event raised an anomaly. Everything in it
// comes from the proposal record, so the index does not depend on the
// order of a batch's writes or on where batches end.
type Change struct {
	Seq       uint64        `json:"seq"`
	Space     string        `json:"space"`
	ID        string        `json:"id"`
	State     ProposalState `json:"state"`
	PrevState ProposalState `json:"prev_state,omitempty"`
	Anomalies []string      `json:"anomalies"`
	Added     []string      `json:"added,omitempty"`
	Event     string        `json:"event,omitempty"`
	DecidedBy string        `json:"decided_by,omitempty"`
	At        time.Time     `json:"at"`
}
