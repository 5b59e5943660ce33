package api

import "encoding/json"

// ActionType is the category of a kernel proposal's action
// (the kernel proposal schema v0.1).
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

// ActionTypes lists the ActionType values in the seed's order.
var ActionTypes = []ActionType{ActionNavigate, ActionRead, ActionWrite, ActionCreate, ActionDelete,
	ActionExecute, ActionCommunicate, ActionTransact, ActionApprove, ActionCustom}

// Valid reports whether a is one of the ActionType values.
func (a ActionType) Valid() bool {
	for _, x := range ActionTypes {
		if a == x {
			return true
		}
	}
	return false
}

// ApprovalClass is the human approval requirement of a kernel proposal.
type ApprovalClass string

// The ApprovalClass values.
const (
	ApprovalNone      ApprovalClass = "none"
	ApprovalSingle    ApprovalClass = "single"
	ApprovalDual      ApprovalClass = "dual"
	ApprovalThreshold ApprovalClass = "threshold"
)

// ApprovalClasses lists the ApprovalClass values.
var ApprovalClasses = []ApprovalClass{ApprovalNone, ApprovalSingle, ApprovalDual, ApprovalThreshold}

// Valid reports whether c is one of the ApprovalClass values.
func (c ApprovalClass) Valid() bool {
	for _, x := range ApprovalClasses {
		if c == x {
			return true
		}
	}
	return false
}

// KernelTarget is the resource a kernel proposal acts on (ledger.Target). Constraints is a
// free-form JSON object (type-specific constraints), nil when absent.
type KernelTarget struct {
	ResourceType string          `json:"resource_type"`
	ResourceID   string          `json:"resource_id"`
	Domain       string          `json:"domain"`
	Constraints  json.RawMessage `json:"constraints,omitempty"`
}
