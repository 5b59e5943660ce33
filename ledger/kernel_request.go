package ledger

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/mewledger/ledger/api"
)

// Fixed values of a Proposal mapped from a KernelRequest.
const (
	// KernelRequestResourceType is the target.resource_type of a mapped
	// KernelRequest: its target is the tool it calls.
	KernelRequestResourceType = "tool"
	// KernelRequestDomain is the target.domain of a mapped KernelRequest. The
	// older form names no system, so the domain is this fixed marker; it
	// also lets an auditor list every mapped request (domain filter).
	KernelRequestDomain = "kernel_request"
)

// mapKernelRequest maps an older KernelRequest object (see [KernelRequest])
// to a Proposal, following the seed's table, and validates the result:
//
//	KernelRequest              Proposal
//	request_id             ->  proposal_id        (V-PROP-001, refusals name request_id)
//	ts_ms                  ->  ts_ms              (V-PROP-002: positive; the older form allowed 0)
//	actor                  ->  actor              (V-PROP-003)
//	tool_call              ->  action_type        "execute" (V-PROP-004: a request without a
//	                                              tool_call object is refused, not guessed)
//	tool_call.name         ->  target             {"resource_type": "tool", "resource_id": <name>,
//	                                              "domain": "kernel_request"} (V-PROP-005: a non-empty string)
//	tool_call.params,      ->  parameters         (V-PROP-006: each, when present, an object; the
//	params                                        non-empty one is used; both non-empty must be
//	                                              equal as canonical JSON; neither gives {})
//	evidence               ->  evidence_bindings  one {"ref": <string>} per string (V-PROP-013: a string,
//	                                              or an array of distinct non-empty strings)
//	intent                 ->  (none)             required non-empty string (missing_field, wrong_type);
//	                                              kept in KernelProposal.Request only
//	                           approval_class     "none"; no preconditions, risk_envelope,
//	                                              rollback_semantics or time_window
//
// Members outside the form (at the top or in tool_call) are unknown_field.
// The mapping checks run first, in the order above (intent last); then the
// mapped Proposal is validated by every rule of ValidateKernel.
//
// What the mapping loses (the log keeps the original bytes, so the ledger
// itself loses nothing; this is about the typed view): the free-text intent
// (the Proposal has no such member; its action_type + target replace it);
// the real category of the tool's action (a read-only tool is still
// "execute": nothing in the older form says more); where the parameters
// were given (params or tool_call.params); and whether evidence was one
// string or a list.
func mapKernelRequest(top fields, opts KernelOptions) (*KernelProposal, *RefusalError) {
	if r := kUnknownIn(top, requestMembers, "", "a KernelRequest"); r != nil {
		return nil, r
	}
	req := &KernelRequest{}
	var r *RefusalError
	if req.RequestID, r = kProposalID(top, "request_id", opts); r != nil {
		return nil, r
	}
	if req.TSms, r = kTSms(top, "ts_ms"); r != nil {
		return nil, r
	}
	if req.Actor, r = kActor(top, "actor", opts); r != nil {
		return nil, r
	}

	raw, ok := top.get("tool_call")
	if !ok {
		return nil, refuse(RuleActionType, "tool_call", "a KernelRequest without tool_call names no action: its action_type cannot be derived from the free-text intent, so it is refused (fail closed)")
	}
	tc, r := kObject(raw, "tool_call", RuleActionType)
	if r != nil {
		return nil, r
	}
	if r := kUnknown(tc, toolCallMembers, "tool_call"); r != nil {
		return nil, r
	}
	name, ok, r := kString(tc, "name", "tool_call.name", RuleTarget)
	if r != nil {
		return nil, r
	}
	if !ok || name == "" {
		return nil, refuse(RuleTarget, "tool_call.name", "tool_call.name is required: the non-empty name of the tool, which becomes target.resource_id")
	}
	req.ToolCall = &ToolCall{Name: name}

	if req.ToolCall.Params, r = kParamsObject(tc, "params", "tool_call.params"); r != nil {
		return nil, r
	}
	if req.Params, r = kParamsObject(top, "params", "params"); r != nil {
		return nil, r
	}
	params := json.RawMessage(`{}`)
	tp, pp := req.ToolCall.Params, req.Params
	switch {
	case !emptyObject(tp) && !emptyObject(pp) && !bytes.Equal(tp, pp):
		return nil, refuse(RuleParameters, "params", "params and tool_call.params are both given and differ: the parameters are ambiguous (fail closed)")
	case !emptyObject(tp):
		params = tp
	case !emptyObject(pp):
		params = pp
	}

	if req.Evidence, r = kEvidenceStrings(top); r != nil {
		return nil, r
	}

	intent, ok, r := kString(top, "intent", "intent", api.CodeWrongType)
	if r != nil {
		return nil, r
	}
	if !ok || intent == "" {
		return nil, refuse(api.CodeMissingField, "intent", "intent is required in a KernelRequest and must be a non-empty string")
	}
	req.Intent = intent

	mapped := &KernelProposal{
		ProposalID: req.RequestID, TSms: req.TSms, Actor: req.Actor,
		ActionType:    api.ActionExecute,
		Target:        &api.KernelTarget{ResourceType: KernelRequestResourceType, ResourceID: name, Domain: KernelRequestDomain},
		Parameters:    params,
		ApprovalClass: api.ApprovalNone,
	}
	for _, e := range req.Evidence {
		mapped.EvidenceBindings = append(mapped.EvidenceBindings, EvidenceBinding{Ref: e})
	}
	b, err := json.Marshal(mapped)
	if err != nil { // unreachable: every member is valid JSON
		return nil, refuse(api.CodeBadValue, "", "the Proposal mapped from this KernelRequest does not marshal: %v", err)
	}
	k, r := validateProposal(splitObject(b), opts)
	if r != nil { // unreachable: the checks above cover every mapped member
		r.Message = "the Proposal mapped from this KernelRequest breaks a rule: " + r.Message
		return nil, r
	}
	k.Request = req
	return k, nil
}

// kParamsObject returns an optional object member in canonical form (nil
// when absent), refusing anything else under V-PROP-006.
func kParamsObject(o fields, name, path string) (json.RawMessage, *RefusalError) {
	raw, ok := o.get(name)
	if !ok {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, refuse(RuleParameters, path, "%s must be a JSON object, not %s", path, kJSONKind(raw))
	}
	return kCanon(raw, path)
}

func emptyObject(c json.RawMessage) bool { return len(c) == 0 || string(c) == "{}" }

// kEvidenceStrings returns the evidence of a KernelRequest: a string, or an
// array of distinct non-empty strings (V-PROP-013).
func kEvidenceStrings(top fields) ([]string, *RefusalError) {
	raw, ok := top.get("evidence")
	if !ok {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		s, r := kEvidenceString(raw, "evidence")
		if r != nil {
			return nil, r
		}
		return []string{s}, nil
	case '[':
		var out []string
		for i, it := range splitArray(raw) {
			p := kIndex("evidence", i)
			s, r := kEvidenceString(it, p)
			if r != nil {
				return nil, r
			}
			if j := slices.Index(out, s); j >= 0 {
				return nil, refuse(RuleEvidence, p, "%s %q repeats %s: each evidence string becomes a binding ref and must be unique", p, s, kIndex("evidence", j))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, refuse(RuleEvidence, "evidence", "evidence must be a string or an array of strings, not %s", kJSONKind(raw))
}

func kEvidenceString(raw json.RawMessage, path string) (string, *RefusalError) {
	if raw[0] != '"' {
		return "", refuse(RuleEvidence, path, "%s must be a string, not %s", path, kJSONKind(raw))
	}
	s := decodeString(raw)
	if s == "" {
		return "", refuse(RuleEvidence, path, "%s must not be empty", path)
	}
	return s, nil
}
