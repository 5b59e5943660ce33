package ledger

import (
	"encoding/json"

	"github.com/mewledger/ledger/api"
)

// Kernel proposals (contract §12, seeds/kernel-proposal-schema-v0.1.md).
//
// A kernel/proposal envelope carries a typed Proposal (or the older
// KernelRequest form, see [KernelRequest]) as its payload. Decode validates
// it fail-closed and puts the typed view in [Decoded.Kernel]; [WrapKernel]
// turns a bare Proposal or KernelRequest into such an envelope. The rules
// and every decision the seed leaves open are documented on
// [ValidateKernel].

// The kernel validation rules of the seed, used as refusal codes. Each rule
// owns the fields it is about; a refusal names the offending field as a JSON
// path in RefusalError.Field.
const (
	RuleProposalID = "V-PROP-001" // proposal_id: non-empty string, equal to the envelope id
	RuleTSms       = "V-PROP-002" // ts_ms: positive integer
	RuleActor      = "V-PROP-003" // actor: non-empty string, equal to the envelope's from
	RuleActionType = "V-PROP-004" // action_type: one of the ActionType values
	RuleTarget     = "V-PROP-005" // target: resource_type, resource_id, domain; constraints an object
	RuleParameters = "V-PROP-006" // parameters: a JSON object
	RuleValidUntil = "V-PROP-010" // time_window (but valid_from_ms): valid_until_ms > current time
	RuleValidFrom  = "V-PROP-011" // time_window.valid_from_ms <= valid_until_ms
	RuleRisk       = "V-PROP-012" // risk_envelope: max_affected_records > 0
	RuleEvidence   = "V-PROP-013" // preconditions and evidence_bindings: every evidence_ref names a binding
	RuleApproval   = "V-PROP-014" // approval_class and approval: the requirement can be met
)

// Limits of a kernel proposal beyond the envelope's own.
const (
	// MaxApprovers is the most entries approval.approvers may list.
	MaxApprovers = 64
)

// PreconditionOperators are the operators a Precondition may use (the
// seed's list).
var PreconditionOperators = []string{"eq", "ne", "gt", "lt", "contains", "matches"}

// RollbackStrategies are the values of RollbackSpec.Strategy.
var RollbackStrategies = []string{"none", "inverse_action", "restore_snapshot", "manual"}

// Precondition is a fact that must hold in the referenced evidence.
// EvidenceRef names an EvidenceBinding of the same proposal by its Ref
// (V-PROP-013). Value is any JSON value, null included (it is required,
// so "value": null is kept as the JSON text null).
type Precondition struct {
	Field       string          `json:"field"`
	Operator    string          `json:"operator"`
	Value       json.RawMessage `json:"value"`
	EvidenceRef string          `json:"evidence_ref"`
}

// RiskEnvelope bounds a kernel proposal's side effects. When a proposal has
// a risk_envelope, max_affected_records is required and positive
// (V-PROP-012); the effect lists (absent means empty) and
// reversible_required (absent means false) are optional.
type RiskEnvelope struct {
	AllowedSideEffects []string `json:"allowed_side_effects,omitempty"`
	ForbiddenEffects   []string `json:"forbidden_effects,omitempty"`
	MaxAffectedRecords *int64   `json:"max_affected_records,omitempty"`
	ReversibleRequired bool     `json:"reversible_required,omitempty"`
}

// RollbackSpec is the recovery procedure of a kernel proposal. The seed
// names it without defining it; this is the ledger's shape: a strategy (one
// of RollbackStrategies, required), an optional action to run (a JSON
// object, free-form), and free-form notes.
type RollbackSpec struct {
	Strategy string          `json:"strategy"`
	Action   json.RawMessage `json:"action,omitempty"`
	Notes    string          `json:"notes,omitempty"`
}

// TimeWindow is the validity period of a kernel proposal, in Unix
// milliseconds: the permit is valid from ValidFromMs (inclusive) until
// ValidUntilMs (exclusive). Both are required when a time_window is given;
// MaxDurationMs (the longest the execution may take) is optional and
// positive.
type TimeWindow struct {
	ValidFromMs   int64 `json:"valid_from_ms"`
	ValidUntilMs  int64 `json:"valid_until_ms"`
	MaxDurationMs int64 `json:"max_duration_ms,omitempty"`
}

// EvidenceBinding names a piece of evidence preconditions can refer to. Ref
// is its identifier within the proposal (required, non-empty, unique among
// the proposal's bindings): a Precondition's evidence_ref names a binding
// by its ref. Source (where the evidence comes from), Digest (of its
// content) and Data (the evidence itself, any JSON) are optional.
type EvidenceBinding struct {
	Ref    string          `json:"ref"`
	Source string          `json:"source,omitempty"`
	Digest string          `json:"digest,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// ApprovalParams are the approval parameters of a kernel proposal, the
// payload member "approval" (a ledger extension: the seed names the classes
// but not their parameters):
//
//	"approval": {"required": 2, "approvers": ["alice", "bob", "carol"]}
//
// For threshold, Required (N >= 1) approvals are needed from the listed
// Approvers (M = len(Approvers), N <= M not counting the proposer). For
// single and dual, Approvers, when given, restricts who may approve, and
// Required, when given, must be 1 or 2. For none, approval must be absent.
type ApprovalParams struct {
	Required  int      `json:"required,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
}

// KernelProposal is the typed Proposal of the kernel schema v0.1, carried as
// the payload of a kernel/proposal envelope. Decode fills it only for a
// payload that passed every rule (see [ValidateKernel]); raw JSON members
// (Parameters, Target.Constraints, Precondition.Value, ...) hold their
// canonical JSON form, so equal proposals have equal typed views.
type KernelProposal struct {
	ProposalID        string            `json:"proposal_id"`
	TSms              int64             `json:"ts_ms"`
	Actor             string            `json:"actor"`
	ActionType        api.ActionType    `json:"action_type"`
	Target            *api.KernelTarget `json:"target"`
	Parameters        json.RawMessage   `json:"parameters"`
	Preconditions     []Precondition    `json:"preconditions,omitempty"`
	RiskEnvelope      *RiskEnvelope     `json:"risk_envelope,omitempty"`
	RollbackSemantics *RollbackSpec     `json:"rollback_semantics,omitempty"`
	TimeWindow        *TimeWindow       `json:"time_window,omitempty"`
	ApprovalClass     api.ApprovalClass `json:"approval_class,omitempty"`
	Approval          *ApprovalParams   `json:"approval,omitempty"`
	EvidenceBindings  []EvidenceBinding `json:"evidence_bindings,omitempty"`

	// Request is the older KernelRequest the proposal was mapped from, nil
	// when the payload was a Proposal. It is not part of the Proposal's
	// JSON form.
	Request *KernelRequest `json:"-"`
}

// RequiredApprovals returns how many distinct approvals the proposal needs
// (0 for none) and the set of approvers that count (nil: anyone but the
// proposer).
func (k *KernelProposal) RequiredApprovals() (int, []string) {
	var approvers []string
	if k.Approval != nil {
		approvers = k.Approval.Approvers
	}
	switch k.ApprovalClass {
	case api.ApprovalSingle:
		return 1, approvers
	case api.ApprovalDual:
		return 2, approvers
	case api.ApprovalThreshold:
		if k.Approval == nil {
			return 0, nil
		}
		return k.Approval.Required, approvers
	default:
		return 0, nil
	}
}

// Method is the method of a kernel proposal as the ledger records it:
// "kernel/" + action_type. A fulfilment of a kernel proposal is an
// mcp/request with this method and the proposal's parameters as params
// (contract §5.3 compares them like any proposal's).
func (k *KernelProposal) Method() string { return "kernel/" + string(k.ActionType) }

// ToolCall is the tool invocation of a KernelRequest: a tool name and its
// parameters.
type ToolCall struct {
	Name   string          `json:"name"`
	Params json.RawMessage `json:"params,omitempty"`
}

// KernelRequest is the older request form the seed's Proposal evolved from
// (the KERNELS project's KernelRequest), as its JSON object:
//
//	{"request_id": "req-1", "ts_ms": 1705171200000, "actor": "agent-1",
//	 "intent": "Read the config", "tool_call": {"name": "read_file", "params": {"path": "/c"}},
//	 "params": {}, "evidence": "ev-1"}
//
// request_id, ts_ms, actor and intent (a non-empty string) are required;
// tool_call, params (an object) and evidence (a string, or an array of
// strings) are optional in the form, but a request without tool_call is
// refused (see [ValidateKernel] for the mapping). Evidence holds the
// evidence strings in order.
type KernelRequest struct {
	RequestID string          `json:"request_id"`
	TSms      int64           `json:"ts_ms"`
	Actor     string          `json:"actor"`
	Intent    string          `json:"intent"`
	ToolCall  *ToolCall       `json:"tool_call,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Evidence  []string        `json:"evidence,omitempty"`
}
