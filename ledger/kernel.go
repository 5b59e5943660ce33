package ledger

import "encoding/json"

// ActionType is the category of a kernel proposal's action
// (seeds/kernel-proposal-schema-v0.1.md).
type ActionType string

// The ActionType values of the kernel schema.
const (
	ActionNavigate    ActionType = "navigate"
	ActionRead        ActionType = "read"
	ActionWrite       ActionType = "write"
	ActionCreate      ActionType = "create"
	ActionDelete      ActionType = "delete"
	ActionExecute     ActionType = "execute"
	ActionCommunicate ActionType = "communicate"
	ActionTransact    ActionType = "transact"
	ActionApprove     ActionType = "approve"
	ActionCustom      ActionType = "custom"
)

// ApprovalClass is the human approval requirement of a kernel proposal.
type ApprovalClass string

// The ApprovalClass values.
const (
	ApprovalNone      ApprovalClass = "none"
	ApprovalSingle    ApprovalClass = "single"
	ApprovalDual      ApprovalClass = "dual"
	ApprovalThreshold ApprovalClass = "threshold"
)

// Target is the resource a kernel proposal acts on.
type Target struct {
	ResourceType string          `json:"resource_type"`
	ResourceID   string          `json:"resource_id"`
	Domain       string          `json:"domain"`
	Constraints  json.RawMessage `json:"constraints,omitempty"`
}

// Precondition is a fact that must hold in the referenced evidence.
type Precondition struct {
	Field       string          `json:"field"`
	Operator    string          `json:"operator"`
	Value       json.RawMessage `json:"value"`
	EvidenceRef string          `json:"evidence_ref"`
}

// RiskEnvelope bounds a kernel proposal's side effects.
type RiskEnvelope struct {
	AllowedSideEffects []string `json:"allowed_side_effects,omitempty"`
	ForbiddenEffects   []string `json:"forbidden_effects,omitempty"`
	MaxAffectedRecords *int64   `json:"max_affected_records,omitempty"`
	ReversibleRequired bool     `json:"reversible_required,omitempty"`
}

// RollbackSpec is the recovery procedure of a kernel proposal. The seed
// names it without defining it; this is the ledger's shape: a strategy
// ("none", "inverse_action", "restore_snapshot", "manual"), an optional
// action to run, and free-form notes.
type RollbackSpec struct {
	Strategy string          `json:"strategy"`
	Action   json.RawMessage `json:"action,omitempty"`
	Notes    string          `json:"notes,omitempty"`
}

// TimeWindow is the validity period of a kernel proposal, in Unix
// milliseconds.
type TimeWindow struct {
	ValidFromMs   int64 `json:"valid_from_ms"`
	ValidUntilMs  int64 `json:"valid_until_ms"`
	MaxDurationMs int64 `json:"max_duration_ms,omitempty"`
}

// EvidenceBinding names a piece of evidence preconditions can refer to.
type EvidenceBinding struct {
	Ref    string          `json:"ref"`
	Source string          `json:"source,omitempty"`
	Digest string          `json:"digest,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// ApprovalParams are the parameters of the threshold approval class: N
// approvals required from the listed Approvers (M = len(Approvers)). For
// single and dual, Approvers, when given, restricts who may approve.
type ApprovalParams struct {
	Required  int      `json:"required,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
}

// KernelProposal is the typed Proposal of the kernel schema v0.1, carried as
// the payload of a kernel/proposal envelope.
type KernelProposal struct {
	ProposalID        string            `json:"proposal_id"`
	TSms              int64             `json:"ts_ms"`
	Actor             string            `json:"actor"`
	ActionType        ActionType        `json:"action_type"`
	Target            *Target           `json:"target"`
	Parameters        json.RawMessage   `json:"parameters"`
	Preconditions     []Precondition    `json:"preconditions,omitempty"`
	RiskEnvelope      *RiskEnvelope     `json:"risk_envelope,omitempty"`
	RollbackSemantics *RollbackSpec     `json:"rollback_semantics,omitempty"`
	TimeWindow        *TimeWindow       `json:"time_window,omitempty"`
	ApprovalClass     ApprovalClass     `json:"approval_class,omitempty"`
	Approval          *ApprovalParams   `json:"approval,omitempty"`
	EvidenceBindings  []EvidenceBinding `json:"evidence_bindings,omitempty"`
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
	case ApprovalSingle:
		return 1, approvers
	case ApprovalDual:
		return 2, approvers
	case ApprovalThreshold:
		if k.Approval == nil {
			return 0, nil
		}
		return k.Approval.Required, approvers
	default:
		return 0, nil
	}
}
