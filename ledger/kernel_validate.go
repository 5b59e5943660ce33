package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
)

// KernelOptions are the inputs of ValidateKernel besides the payload.
type KernelOptions struct {
	// Now is the "current time" of V-PROP-010: the append time on submit
	// paths, the stream timestamp when folding (so a replay gives the same
	// answer). Nothing here reads the wall clock. A zero Now refuses every
	// proposal that has a time_window (fail closed: there is nothing to
	// compare valid_until_ms with).
	Now time.Time
	// ID, when not empty, is the id of the envelope carrying the proposal:
	// proposal_id (request_id) must equal it (V-PROP-001).
	ID string
	// From, when not empty, is the envelope's sender (authenticated under
	// contract §5.8): actor must equal it (V-PROP-003).
	From string
}

// proposalMembers are the top-level members of a Proposal, from
// KernelProposal's json tags; requestMembers those of a KernelRequest.
var (
	proposalMembers = jsonMembers[KernelProposal]()
	requestMembers  = jsonMembers[KernelRequest]()
	targetMembers   = jsonMembers[api.KernelTarget]()
	precondMembers  = jsonMembers[Precondition]()
	riskMembers     = jsonMembers[RiskEnvelope]()
	rollbackMembers = jsonMembers[RollbackSpec]()
	windowMembers   = jsonMembers[TimeWindow]()
	bindingMembers  = jsonMembers[EvidenceBinding]()
	approvalMembers = jsonMembers[ApprovalParams]()
	toolCallMembers = jsonMembers[ToolCall]()
)

// ValidateKernel validates a kernel payload — a Proposal object, or an older
// KernelRequest object (it has request_id and no proposal_id), which is
// mapped to a Proposal first — and returns its typed view. It is what Decode
// runs on the payload of a kernel/proposal envelope (with opts.ID and
// opts.From set to the envelope's id and from) and what WrapKernel runs on a
// bare submission.
//
// It is pure and fails closed: the first rule broken is reported as a
// *RefusalError whose Code is the rule id ("V-PROP-005") and whose Field is
// the JSON path of the offending member relative to the payload
// ("target.domain"; Decode prefixes "payload."). Each rule owns the members
// it is about:
//
//   - V-PROP-001 proposal_id: a non-empty string of at most MaxIDBytes bytes
//     without control characters (it becomes the envelope id), equal to
//     opts.ID.
//   - V-PROP-002 ts_ms: a positive integer.
//   - V-PROP-003 actor: like proposal_id (it becomes the envelope's from),
//     equal to opts.From: an actor other than the sender is a spoof.
//   - V-PROP-004 action_type: one of ActionTypes.
//   - V-PROP-005 target: an object with non-empty strings resource_type,
//     resource_id and domain; constraints, when present, an object.
//   - V-PROP-006 parameters: required, a JSON object (any members).
//   - V-PROP-010 time_window (optional; every member but valid_from_ms):
//     an object; valid_until_ms an integer later than opts.Now;
//     max_duration_ms, when present, a positive integer.
//   - V-PROP-011 time_window.valid_from_ms: required in a time_window, an
//     integer, at most valid_until_ms.
//   - V-PROP-012 risk_envelope (optional): an object whose
//     max_affected_records is a positive integer; allowed_side_effects and
//     forbidden_effects arrays of non-empty strings; reversible_required a
//     boolean.
//   - V-PROP-013 evidence_bindings and preconditions (optional arrays of
//     objects): every binding has a non-empty ref, unique in the proposal
//     (source and digest strings, data any JSON); every precondition has a
//     non-empty field, an operator from PreconditionOperators, a value (any
//     JSON, null included) and a non-empty evidence_ref. When the proposal
//     has an evidence_bindings member (even []), it declares its evidence
//     completely and every evidence_ref must name a binding's ref. Without
//     one, evidence_ref refers to an evidence packet outside the proposal
//     and cannot be checked: that is how the seed's own example is written
//     (a precondition on "evidence-001", no evidence_bindings), and the contract
//     requires that example to be accepted as is.
//   - V-PROP-014 approval_class (optional, default none) and approval: the
//     class is one of ApprovalClasses and can be satisfied. none: approval
//     absent. threshold: approval.required N >= 1 and approval.approvers
//     listing at least N approvers other than the actor. single/dual:
//     approval optional; approval.required, when given, is 1/2;
//     approval.approvers, when given, lists at least 1/2 approvers other
//     than the actor. approvers: 1..MaxApprovers distinct strings, each like
//     an envelope id (non-empty, at most MaxIDBytes bytes, no control
//     characters). A proposer listed as approver is allowed but never counts.
//
// Other refusals: a member outside the schema, at the top level or inside
// a schema-defined object (not inside the free-form parameters,
// constraints, value, data and action) is unknown_field; rollback_semantics,
// which no rule covers, is checked with the generic codes (wrong_type,
// missing_field, bad_value): an object with a strategy from
// RollbackStrategies, an optional action object and optional notes string.
// null for an optional member means absent; null for a required one is
// missing. Integers are JSON integer literals within int64: a fraction or
// an exponent (1.5, 1.0, 1e3) or a string is refused under the member's
// rule. Checks run in rule order (unknown members first), so the same
// payload always gets the same refusal.
//
// A KernelRequest is mapped as the seed's table says, then the mapped
// Proposal is validated by the rules above (see mapKernelRequest for the
// exact mapping and what it loses); refusals name the KernelRequest's own
// members.
//
// The typed view holds canonical JSON in its raw members and has
// ApprovalClass set ("none" when absent), so marshalling it gives a
// Proposal that validates to an equal view (Request aside).
func ValidateKernel(payload []byte, opts KernelOptions) (*KernelProposal, error) {
	k, r := validateKernel(payload, opts)
	if r != nil {
		return nil, r
	}
	return k, nil
}

func validateKernel(payload []byte, opts KernelOptions) (*KernelProposal, *RefusalError) {
	if testOnlyOnValidate != nil {
		testOnlyOnValidate()
	}
	payload = bytes.TrimSpace(payload)
	if !utf8.Valid(payload) {
		return nil, refuse(api.CodeInvalidUTF8, "", "the kernel payload is not valid UTF-8")
	}
	if _, err := canon.Canonical(payload); err != nil {
		return nil, kernelCanonRefusal(err)
	}
	top, r := kObject(payload, "", api.CodeWrongType)
	if r != nil {
		return nil, r
	}
	_, hasReq := top.member("request_id")
	_, hasProp := top.member("proposal_id")
	if hasReq && !hasProp {
		return mapKernelRequest(top, opts)
	}
	return validateProposal(top, opts)
}

// IsBareKernel reports whether raw looks like a bare kernel submission (a
// Proposal or KernelRequest object, not an envelope): a JSON object with a
// proposal_id or request_id member and no protocol member. It does not
// validate; MaybeBareKernel (PrepareBodyStandalone's dialect detection)
// uses it to decide whether to call WrapKernel.
func IsBareKernel(raw []byte) bool {
	if !json.Valid(raw) {
		return false
	}
	v := raw[scanWS(raw, 0):]
	if v[0] != '{' {
		return false
	}
	if _, ok := findMember(v, "protocol"); ok {
		return false
	}
	_, p := findMember(v, "proposal_id")
	_, q := findMember(v, "request_id")
	return p || q
}

// validateProposal checks a Proposal object's members (see ValidateKernel).
func validateProposal(top fields, opts KernelOptions) (*KernelProposal, *RefusalError) {
	if r := kUnknown(top, proposalMembers, ""); r != nil {
		return nil, r
	}
	k := &KernelProposal{}
	var r *RefusalError

	// V-PROP-001..003
	if k.ProposalID, r = kProposalID(top, "proposal_id", opts); r != nil {
		return nil, r
	}
	if k.TSms, r = kTSms(top, "ts_ms"); r != nil {
		return nil, r
	}
	if k.Actor, r = kActor(top, "actor", opts); r != nil {
		return nil, r
	}

	// V-PROP-004
	at, ok, r := kString(top, "action_type", "action_type", RuleActionType)
	if r != nil {
		return nil, r
	}
	k.ActionType = api.ActionType(at)
	if !ok {
		return nil, refuse(RuleActionType, "action_type", "action_type is required: one of %s", joinActions())
	}
	if !k.ActionType.Valid() {
		return nil, refuse(RuleActionType, "action_type", "action_type %q is not one of %s", at, joinActions())
	}

	// V-PROP-005
	if k.Target, r = kTarget(top); r != nil {
		return nil, r
	}

	// V-PROP-006
	raw, ok := top.get("parameters")
	if !ok {
		return nil, refuse(RuleParameters, "parameters", "parameters is required: a JSON object of the action's parameters")
	}
	if raw[0] != '{' {
		return nil, refuse(RuleParameters, "parameters", "parameters must be a JSON object, not %s", kJSONKind(raw))
	}
	if k.Parameters, r = kCanon(raw, "parameters"); r != nil {
		return nil, r
	}

	// V-PROP-010, V-PROP-011
	if k.TimeWindow, r = kTimeWindow(top, opts.Now); r != nil {
		return nil, r
	}
	// V-PROP-012
	if k.RiskEnvelope, r = kRiskEnvelope(top); r != nil {
		return nil, r
	}
	// V-PROP-013
	_, declared := top.get("evidence_bindings")
	if k.EvidenceBindings, r = kBindings(top); r != nil {
		return nil, r
	}
	if k.Preconditions, r = kPreconditions(top, k.EvidenceBindings, declared); r != nil {
		return nil, r
	}
	// V-PROP-014
	if k.ApprovalClass, k.Approval, r = kApproval(top, k.Actor); r != nil {
		return nil, r
	}
	// No rule: generic codes.
	if k.RollbackSemantics, r = kRollback(top); r != nil {
		return nil, r
	}
	return k, nil
}

// kProposalID checks the proposal's id member (proposal_id, or request_id
// of a KernelRequest) under V-PROP-001.
func kProposalID(o fields, name string, opts KernelOptions) (string, *RefusalError) {
	id, r := kIDString(o, name, name, RuleProposalID)
	if r != nil {
		return "", r
	}
	if opts.ID != "" && id != opts.ID {
		return "", refuse(RuleProposalID, name, "%s %q must equal the envelope id %q: a kernel proposal is filed under its own id", name, id, opts.ID)
	}
	return id, nil
}

// kTSms checks ts_ms under V-PROP-002.
func kTSms(o fields, name string) (int64, *RefusalError) {
	raw, ok := o.get(name)
	if !ok {
		return 0, refuse(RuleTSms, name, "%s is required: a positive integer (Unix milliseconds)", name)
	}
	n, r := kInt(raw, name, RuleTSms)
	if r != nil {
		return 0, r
	}
	if n <= 0 {
		return 0, refuse(RuleTSms, name, "%s must be a positive integer, not %d", name, n)
	}
	return n, nil
}

// kActor checks actor under V-PROP-003.
func kActor(o fields, name string, opts KernelOptions) (string, *RefusalError) {
	a, r := kIDString(o, name, name, RuleActor)
	if r != nil {
		return "", r
	}
	if opts.From != "" && a != opts.From {
		return "", refuse(RuleActor, name, "%s %q must equal the envelope's from %q: a proposal speaks for its sender only", name, a, opts.From)
	}
	return a, nil
}

func kTarget(top fields) (*api.KernelTarget, *RefusalError) {
	raw, ok := top.get("target")
	if !ok {
		return nil, refuse(RuleTarget, "target", "target is required: an object with resource_type, resource_id and domain")
	}
	o, r := kObject(raw, "target", RuleTarget)
	if r != nil {
		return nil, r
	}
	if r := kUnknown(o, targetMembers, "target"); r != nil {
		return nil, r
	}
	t := &api.KernelTarget{}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"resource_type", &t.ResourceType}, {"resource_id", &t.ResourceID}, {"domain", &t.Domain}} {
		p := "target." + f.name
		s, ok, r := kString(o, f.name, p, RuleTarget)
		if r != nil {
			return nil, r
		}
		if !ok || s == "" {
			return nil, refuse(RuleTarget, p, "%s is required and must be a non-empty string", p)
		}
		*f.dst = s
	}
	if raw, ok := o.get("constraints"); ok {
		if raw[0] != '{' {
			return nil, refuse(RuleTarget, "target.constraints", "target.constraints must be an object, not %s", kJSONKind(raw))
		}
		if t.Constraints, r = kCanon(raw, "target.constraints"); r != nil {
			return nil, r
		}
	}
	return t, nil
}

func kTimeWindow(top fields, now time.Time) (*TimeWindow, *RefusalError) {
	raw, ok := top.get("time_window")
	if !ok {
		return nil, nil
	}
	o, r := kObject(raw, "time_window", RuleValidUntil)
	if r != nil {
		return nil, r
	}
	if r := kUnknown(o, windowMembers, "time_window"); r != nil {
		return nil, r
	}
	w := &TimeWindow{}
	const up, fp, dp = "time_window.valid_until_ms", "time_window.valid_from_ms", "time_window.max_duration_ms"
	raw, ok = o.get("valid_until_ms")
	if !ok {
		return nil, refuse(RuleValidUntil, up, "%s is required in a time_window: an integer (Unix milliseconds)", up)
	}
	if w.ValidUntilMs, r = kInt(raw, up, RuleValidUntil); r != nil {
		return nil, r
	}
	if now.IsZero() {
		return nil, refuse(RuleValidUntil, up, "no current time to check %s against (fail closed)", up)
	}
	if nowMs := now.UnixMilli(); w.ValidUntilMs <= nowMs {
		return nil, refuse(RuleValidUntil, up, "%s %d (%s) must be after the current time %d (%s)", up,
			w.ValidUntilMs, msTime(w.ValidUntilMs), nowMs, msTime(nowMs))
	}
	if raw, ok := o.get("max_duration_ms"); ok {
		if w.MaxDurationMs, r = kInt(raw, dp, RuleValidUntil); r != nil {
			return nil, r
		}
		if w.MaxDurationMs <= 0 {
			return nil, refuse(RuleValidUntil, dp, "%s must be a positive integer, not %d", dp, w.MaxDurationMs)
		}
	}
	raw, ok = o.get("valid_from_ms")
	if !ok {
		return nil, refuse(RuleValidFrom, fp, "%s is required in a time_window: an integer (Unix milliseconds)", fp)
	}
	if w.ValidFromMs, r = kInt(raw, fp, RuleValidFrom); r != nil {
		return nil, r
	}
	if w.ValidFromMs > w.ValidUntilMs {
		return nil, refuse(RuleValidFrom, fp, "%s %d (%s) must not be after valid_until_ms %d (%s)", fp,
			w.ValidFromMs, msTime(w.ValidFromMs), w.ValidUntilMs, msTime(w.ValidUntilMs))
	}
	return w, nil
}

func kRiskEnvelope(top fields) (*RiskEnvelope, *RefusalError) {
	raw, ok := top.get("risk_envelope")
	if !ok {
		return nil, nil
	}
	o, r := kObject(raw, "risk_envelope", RuleRisk)
	if r != nil {
		return nil, r
	}
	if r := kUnknown(o, riskMembers, "risk_envelope"); r != nil {
		return nil, r
	}
	e := &RiskEnvelope{}
	const mp = "risk_envelope.max_affected_records"
	raw, ok = o.get("max_affected_records")
	if !ok {
		return nil, refuse(RuleRisk, mp, "%s is required in a risk_envelope: a positive integer", mp)
	}
	n, r := kInt(raw, mp, RuleRisk)
	if r != nil {
		return nil, r
	}
	if n <= 0 {
		return nil, refuse(RuleRisk, mp, "%s must be > 0, not %d", mp, n)
	}
	e.MaxAffectedRecords = &n
	if e.AllowedSideEffects, r = kStringList(o, "allowed_side_effects", "risk_envelope.allowed_side_effects", RuleRisk); r != nil {
		return nil, r
	}
	if e.ForbiddenEffects, r = kStringList(o, "forbidden_effects", "risk_envelope.forbidden_effects", RuleRisk); r != nil {
		return nil, r
	}
	if raw, ok := o.get("reversible_required"); ok {
		if string(raw) != "true" && string(raw) != "false" {
			return nil, refuse(RuleRisk, "risk_envelope.reversible_required", "risk_envelope.reversible_required must be a boolean, not %s", kJSONKind(raw))
		}
		e.ReversibleRequired = string(raw) == "true"
	}
	return e, nil
}

func kBindings(top fields) ([]EvidenceBinding, *RefusalError) {
	items, r := kArray(top, "evidence_bindings", "evidence_bindings", RuleEvidence)
	if r != nil || len(items) == 0 {
		return nil, r
	}
	out := make([]EvidenceBinding, 0, len(items))
	for i, it := range items {
		p := kIndex("evidence_bindings", i)
		o, r := kObject(it, p, RuleEvidence)
		if r != nil {
			return nil, r
		}
		if r := kUnknown(o, bindingMembers, p); r != nil {
			return nil, r
		}
		var b EvidenceBinding
		ref, ok, r := kString(o, "ref", p+".ref", RuleEvidence)
		if r != nil {
			return nil, r
		}
		if !ok || ref == "" {
			return nil, refuse(RuleEvidence, p+".ref", "%s.ref is required: the non-empty name preconditions refer to it by", p)
		}
		if j := slices.IndexFunc(out, func(x EvidenceBinding) bool { return x.Ref == ref }); j >= 0 {
			return nil, refuse(RuleEvidence, p+".ref", "%s.ref %q is already bound by evidence_bindings[%d]: an evidence_ref must name one binding", p, ref, j)
		}
		b.Ref = ref
		if b.Source, _, r = kString(o, "source", p+".source", RuleEvidence); r != nil {
			return nil, r
		}
		if b.Digest, _, r = kString(o, "digest", p+".digest", RuleEvidence); r != nil {
			return nil, r
		}
		if raw, ok := o.get("data"); ok {
			if b.Data, r = kCanon(raw, p+".data"); r != nil {
				return nil, r
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// kPreconditions checks the preconditions; when declared (the proposal has
// an evidence_bindings member, even empty), every evidence_ref must name one
// of bindings.
func kPreconditions(top fields, bindings []EvidenceBinding, declared bool) ([]Precondition, *RefusalError) {
	items, r := kArray(top, "preconditions", "preconditions", RuleEvidence)
	if r != nil || len(items) == 0 {
		return nil, r
	}
	out := make([]Precondition, 0, len(items))
	for i, it := range items {
		p := kIndex("preconditions", i)
		o, r := kObject(it, p, RuleEvidence)
		if r != nil {
			return nil, r
		}
		if r := kUnknown(o, precondMembers, p); r != nil {
			return nil, r
		}
		var c Precondition
		field, ok, r := kString(o, "field", p+".field", RuleEvidence)
		if r != nil {
			return nil, r
		}
		if !ok || field == "" {
			return nil, refuse(RuleEvidence, p+".field", "%s.field is required: the non-empty evidence field to check", p)
		}
		c.Field = field
		op, ok, r := kString(o, "operator", p+".operator", RuleEvidence)
		if r != nil {
			return nil, r
		}
		if !ok {
			return nil, refuse(RuleEvidence, p+".operator", "%s.operator is required: one of %s", p, strings.Join(PreconditionOperators, ", "))
		}
		if !slices.Contains(PreconditionOperators, op) {
			return nil, refuse(RuleEvidence, p+".operator", "%s.operator %q is not one of %s", p, op, strings.Join(PreconditionOperators, ", "))
		}
		c.Operator = op
		raw, present := o.member("value") // null is a value here
		if !present {
			return nil, refuse(RuleEvidence, p+".value", "%s.value is required (any JSON value, null included)", p)
		}
		if c.Value, r = kCanon(raw, p+".value"); r != nil {
			return nil, r
		}
		ref, ok, r := kString(o, "evidence_ref", p+".evidence_ref", RuleEvidence)
		if r != nil {
			return nil, r
		}
		if !ok || ref == "" {
			return nil, refuse(RuleEvidence, p+".evidence_ref", "%s.evidence_ref is required: the ref of an entry of evidence_bindings", p)
		}
		if declared && !slices.ContainsFunc(bindings, func(b EvidenceBinding) bool { return b.Ref == ref }) {
			return nil, refuse(RuleEvidence, p+".evidence_ref", "%s.evidence_ref %q names no entry of evidence_bindings (by its ref)", p, ref)
		}
		c.EvidenceRef = ref
		out = append(out, c)
	}
	return out, nil
}

func kApproval(top fields, actor string) (api.ApprovalClass, *ApprovalParams, *RefusalError) {
	cls, ok, r := kString(top, "approval_class", "approval_class", RuleApproval)
	if r != nil {
		return "", nil, r
	}
	class := api.ApprovalNone
	if ok {
		class = api.ApprovalClass(cls)
		if !class.Valid() {
			return "", nil, refuse(RuleApproval, "approval_class", "approval_class %q is not one of none, single, dual, threshold", cls)
		}
	}
	raw, has := top.get("approval")
	if !has {
		if class == api.ApprovalThreshold {
			return "", nil, refuse(RuleApproval, "approval", `approval_class threshold needs "approval": {"required": N, "approvers": [...]}`)
		}
		return class, nil, nil
	}
	if class == api.ApprovalNone {
		what := "is none"
		if !ok {
			what = "is absent (none)"
		}
		return "", nil, refuse(RuleApproval, "approval", "approval must be absent when approval_class %s: there is nothing to approve", what)
	}
	o, r := kObject(raw, "approval", RuleApproval)
	if r != nil {
		return "", nil, r
	}
	if r := kUnknown(o, approvalMembers, "approval"); r != nil {
		return "", nil, r
	}
	a := &ApprovalParams{}
	const rp, ap = "approval.required", "approval.approvers"
	rraw, hasRequired := o.get("required")
	if hasRequired {
		n, r := kInt(rraw, rp, RuleApproval)
		if r != nil {
			return "", nil, r
		}
		if n < 1 || n > MaxApprovers {
			return "", nil, refuse(RuleApproval, rp, "%s must be between 1 and %d, not %d", rp, MaxApprovers, n)
		}
		a.Required = int(n)
	}
	if araw, ok := o.get("approvers"); ok {
		if araw[0] != '[' {
			return "", nil, refuse(RuleApproval, ap, "%s must be an array of approver ids, not %s", ap, kJSONKind(araw))
		}
		items := splitArray(araw)
		if len(items) == 0 {
			return "", nil, refuse(RuleApproval, ap, "%s must not be empty: nobody could approve (omit it to let anyone but the proposer approve)", ap)
		}
		if len(items) > MaxApprovers {
			return "", nil, refuse(RuleApproval, ap, "%s lists %d approvers, over the limit of %d", ap, len(items), MaxApprovers)
		}
		for i, it := range items {
			p := kIndex(ap, i)
			s, r := kIDValue(it, p, RuleApproval)
			if r != nil {
				return "", nil, r
			}
			if j := slices.Index(a.Approvers, s); j >= 0 {
				return "", nil, refuse(RuleApproval, p, "%s %q is listed twice (also %s): approvers must be distinct", p, s, kIndex(ap, j))
			}
			a.Approvers = append(a.Approvers, s)
		}
	}
	eligible := 0
	for _, s := range a.Approvers {
		if s != actor {
			eligible++
		}
	}
	need := map[api.ApprovalClass]int{api.ApprovalSingle: 1, api.ApprovalDual: 2}[class]
	switch class {
	case api.ApprovalThreshold:
		if !hasRequired {
			return "", nil, refuse(RuleApproval, rp, "approval_class threshold needs %s: N >= 1 approvals", rp)
		}
		if a.Approvers == nil {
			return "", nil, refuse(RuleApproval, ap, "approval_class threshold needs %s: the M approvers N of whom must approve", ap)
		}
		if a.Required > eligible {
			return "", nil, refuse(RuleApproval, rp, "%s is %d but only %d listed approvers other than the proposer %q can approve: unsatisfiable", rp, a.Required, eligible, actor)
		}
	default: // single, dual
		if hasRequired && a.Required != need {
			return "", nil, refuse(RuleApproval, rp, "approval_class %s needs exactly %d approvals; %s is %d (use threshold for N of M)", class, need, rp, a.Required)
		}
		if a.Approvers != nil && eligible < need {
			return "", nil, refuse(RuleApproval, ap, "approval_class %s needs %d distinct approvers other than the proposer %q, but %s lists %d: unsatisfiable", class, need, actor, ap, eligible)
		}
	}
	return class, a, nil
}

func kRollback(top fields) (*RollbackSpec, *RefusalError) {
	raw, ok := top.get("rollback_semantics")
	if !ok {
		return nil, nil
	}
	o, r := kObject(raw, "rollback_semantics", api.CodeWrongType)
	if r != nil {
		return nil, r
	}
	if r := kUnknown(o, rollbackMembers, "rollback_semantics"); r != nil {
		return nil, r
	}
	rs := &RollbackSpec{}
	const sp = "rollback_semantics.strategy"
	s, ok, r := kString(o, "strategy", sp, api.CodeWrongType)
	if r != nil {
		return nil, r
	}
	if !ok {
		return nil, refuse(api.CodeMissingField, sp, "%s is required: one of %s", sp, strings.Join(RollbackStrategies, ", "))
	}
	if !slices.Contains(RollbackStrategies, s) {
		return nil, refuse(api.CodeBadValue, sp, "%s %q is not one of %s", sp, s, strings.Join(RollbackStrategies, ", "))
	}
	rs.Strategy = s
	if raw, ok := o.get("action"); ok {
		if raw[0] != '{' {
			return nil, refuse(api.CodeWrongType, "rollback_semantics.action", "rollback_semantics.action must be an object, not %s", kJSONKind(raw))
		}
		if rs.Action, r = kCanon(raw, "rollback_semantics.action"); r != nil {
			return nil, r
		}
	}
	if rs.Notes, _, r = kString(o, "notes", "rollback_semantics.notes", api.CodeWrongType); r != nil {
		return nil, r
	}
	return rs, nil
}

// jsonMembers lists the JSON member names of a struct type's fields.
func jsonMembers[T any]() []string {
	var names []string
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// kUnknown refuses the first member (in key order) of o not in allowed.
func kUnknown(o fields, allowed []string, prefix string) *RefusalError {
	return kUnknownIn(o, allowed, prefix, "a kernel proposal")
}

// kUnknownIn is kUnknown naming the top-level object "where".
func kUnknownIn(o fields, allowed []string, prefix, where string) *RefusalError {
	var unknown []string
	for _, m := range o {
		if !slices.Contains(allowed, m.name) {
			unknown = append(unknown, m.name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	if prefix != "" {
		where = prefix
	}
	p := kPath(prefix, unknown[0])
	return refuse(api.CodeUnknownField, p, "%q is not a member of %s (the schema has %s); unknown members are refused, not ignored",
		unknown[0], where, strings.Join(allowed, ", "))
}

// kObject splits raw (valid JSON: validateKernel canonicalised the whole
// payload first) as an object; anything else is refused with code.
func kObject(raw json.RawMessage, path, code string) (fields, *RefusalError) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, refuse(code, path, "%s must be a JSON object, not %s", kWhat(path), kJSONKind(raw))
	}
	return splitObject(raw), nil
}

// kArray returns the items of an optional array member (nil when absent).
func kArray(o fields, name, path, code string) ([]json.RawMessage, *RefusalError) {
	raw, ok := o.get(name)
	if !ok {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, refuse(code, path, "%s must be an array, not %s", path, kJSONKind(raw))
	}
	return splitArray(raw), nil
}

// kString returns an optional string member; present is false when it is
// absent or null.
func kString(o fields, name, path, code string) (s string, present bool, r *RefusalError) {
	raw, ok := o.get(name)
	if !ok {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, refuse(code, path, "%s must be a string, not %s", path, kJSONKind(raw))
	}
	return decodeString(raw), true, nil
}

// kStringList returns an optional array of non-empty strings.
func kStringList(o fields, name, path, code string) ([]string, *RefusalError) {
	items, r := kArray(o, name, path, code)
	if r != nil || len(items) == 0 {
		return nil, r
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		p := kIndex(path, i)
		if it[0] != '"' {
			return nil, refuse(code, p, "%s must be a string, not %s", p, kJSONKind(it))
		}
		s := decodeString(it)
		if s == "" {
			return nil, refuse(code, p, "%s must not be empty", p)
		}
		out = append(out, s)
	}
	return out, nil
}

// kIDString returns a required id-like string member (see kIDValue).
func kIDString(o fields, name, path, code string) (string, *RefusalError) {
	raw, ok := o.get(name)
	if !ok {
		return "", refuse(code, path, "%s is required and must be a non-empty string", path)
	}
	return kIDValue(raw, path, code)
}

// kIDValue checks a value that becomes or is compared with an envelope id
// or sender: a non-empty string of at most MaxIDBytes bytes without control
// characters.
func kIDValue(raw json.RawMessage, path, code string) (string, *RefusalError) {
	if raw[0] != '"' {
		return "", refuse(code, path, "%s must be a non-empty string, not %s", path, kJSONKind(raw))
	}
	s := decodeString(raw)
	if s == "" {
		return "", refuse(code, path, "%s must be a non-empty string", path)
	}
	if len(s) > MaxIDBytes {
		return "", refuse(code, path, "%s is %d bytes, over the limit of %d", path, len(s), MaxIDBytes)
	}
	for i, c := range s {
		if unicode.IsControl(c) {
			return "", refuse(code, path, "%s contains the control character U+%04X at byte %d", path, c, i)
		}
	}
	return s, nil
}

// kInt parses a JSON integer literal (no fraction, no exponent) in int64.
func kInt(raw json.RawMessage, path, code string) (int64, *RefusalError) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, refuse(code, path, "%s must be an integer, not %s", path, kJSONKind(raw))
	}
	if bytes.ContainsAny(raw, ".eE") {
		return 0, refuse(code, path, "%s must be an integer (no fraction or exponent), not %s", path, truncate(string(raw), 40))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, refuse(code, path, "%s %s is out of range", path, truncate(string(raw), 40))
	}
	return n, nil
}

// kCanon returns the canonical form of a raw member.
func kCanon(raw json.RawMessage, path string) (json.RawMessage, *RefusalError) {
	c, err := canon.Canonical(raw)
	if err != nil { // unreachable: the whole payload was canonicalised first
		return nil, refuse(api.CodeNotJSON, path, "%s: %v", path, err)
	}
	return c, nil
}

// kernelCanonRefusal maps a canon error on a kernel payload to a refusal.
func kernelCanonRefusal(err error) *RefusalError {
	var ce *canon.Error
	if !errors.As(err, &ce) {
		return refuse(api.CodeNotJSON, "", "the kernel payload is not valid JSON: %v", err)
	}
	if errors.Is(err, canon.ErrEncoding) {
		return refuse(api.CodeInvalidUTF8, ce.Path, "%s at byte %d", ce.Msg, ce.Offset)
	}
	return refuse(api.CodeNotJSON, ce.Path, "the kernel payload is not valid JSON: %s at byte %d", ce.Msg, ce.Offset)
}

func kJSONKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the number " + truncate(string(v), 40)
}

func kPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func kIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func kWhat(path string) string {
	if path == "" {
		return "the kernel payload"
	}
	return path
}

func joinActions() string {
	s := make([]string, len(api.ActionTypes))
	for i, a := range api.ActionTypes {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// msTime renders Unix milliseconds as RFC 3339 UTC.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
