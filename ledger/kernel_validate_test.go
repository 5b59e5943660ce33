package ledger

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
)

// kernelNow is "current time" for the kernel tests: inside the seed
// example's window (valid 18:40:00..18:45:00 UTC on 2024-01-13).
var kernelNow = time.Date(2024, 1, 13, 18, 41, 0, 0, time.UTC)

// kBase is a valid proposal using every member, the starting point of the
// rule table's edits.
const kBase = `{"proposal_id":"p-1","ts_ms":1705171200000,"actor":"agent-1","action_type":"write",
 "target":{"resource_type":"crm_record","resource_id":"c-1","domain":"salesforce.com","constraints":{"allowed_fields":["email"]}},
 "parameters":{"updates":{"email":"a@b.c"}},
 "preconditions":[{"field":"record_exists","operator":"eq","value":true,"evidence_ref":"ev-1"}],
 "evidence_bindings":[{"ref":"ev-1","source":"crm://c-1","digest":"sha256:ab","data":{"exists":true}}],
 "risk_envelope":{"allowed_side_effects":["audit_log_entry"],"forbidden_effects":["email_notification"],"max_affected_records":1,"reversible_required":true},
 "rollback_semantics":{"strategy":"inverse_action","action":{"method":"restore"},"notes":"n"},
 "time_window":{"valid_from_ms":1705171200000,"valid_until_ms":1705171500000,"max_duration_ms":30000},
 "approval_class":"threshold","approval":{"required":2,"approvers":["alice","bob","carol"]}}`

// edit replaces (raw != "") or deletes (del) the member at a path such as
// "preconditions[0].operator".
type edit struct {
	path, raw string
	del       bool
}

func set(path, raw string) edit { return edit{path: path, raw: raw} }
func del(path string) edit      { return edit{path: path, del: true} }

// mutate applies edits to the JSON text base. Numbers keep their literal
// form; raw values are inserted as given.
func mutate(t testing.TB, base string, edits ...edit) string {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(base))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("base: %v", err)
	}
	for _, e := range edits {
		v = applyEdit(t, v, splitPath(e.path), e)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("mutate %v: %v", edits, err)
	}
	return string(b)
}

func splitPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		name, idx, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		if idx != "" {
			out = append(out, "["+idx)
		}
	}
	return out
}

func applyEdit(t testing.TB, v any, path []string, e edit) any {
	t.Helper()
	key := path[0]
	if strings.HasPrefix(key, "[") {
		i, _ := strconv.Atoi(strings.Trim(key, "[]"))
		arr, ok := v.([]any)
		if !ok || i >= len(arr) {
			t.Fatalf("edit %q: no element %d", e.path, i)
		}
		switch {
		case len(path) > 1:
			arr[i] = applyEdit(t, arr[i], path[1:], e)
		case e.del:
			arr = append(arr[:i], arr[i+1:]...)
		default:
			arr[i] = json.RawMessage(e.raw)
		}
		return arr
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("edit %q: %q is not in an object", e.path, key)
	}
	switch {
	case len(path) > 1:
		m[key] = applyEdit(t, m[key], path[1:], e)
	case e.del:
		delete(m, key)
	default:
		m[key] = json.RawMessage(e.raw)
	}
	return m
}

// kernelEnvelope wraps payload in a kernel/proposal envelope with the given
// id and from.
func kernelEnvelope(id, from, payload string) []byte {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []byte(`{"protocol":"mew/v0.4","id":` + q(id) + `,"from":` + q(from) + `,"kind":"kernel/proposal","payload":` + payload + `}`)
}

// envFor returns the id and from an envelope carrying payload would have:
// its proposal_id and actor when they are usable ids, else fixed ones (so
// that the payload, not the envelope, is what gets refused).
func envFor(payload string) (id, from string) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(payload), &m)
	pick := func(name, def string) string {
		if raw, ok := m[name]; ok && len(raw) > 0 {
			if s, r := kIDValue(raw, name, "x"); r == nil {
				return s
			}
		}
		return def
	}
	return pick("proposal_id", pick("request_id", "p-1")), pick("actor", "agent-1")
}

type ruleCase struct {
	rule  string // the rule (or generic code family) the case exercises
	name  string
	edits []edit
	code  string // "" = accepted
	field string // path relative to the payload
}

var ruleCases = []ruleCase{
	{"base", "every member", nil, "", ""},
	{"base", "required members only", []edit{del("preconditions"), del("evidence_bindings"), del("risk_envelope"), del("rollback_semantics"), del("time_window"), del("approval_class"), del("approval"), del("target.constraints")}, "", ""},
	{"base", "optional members null", []edit{set("preconditions", "null"), set("evidence_bindings", "null"), set("risk_envelope", "null"), set("rollback_semantics", "null"), set("time_window", "null"), set("approval_class", "null"), set("approval", "null"), set("target.constraints", "null")}, "", ""},
	{"unknown", "top-level member", []edit{set("zeta", "1"), set("extra", "2")}, api.CodeUnknownField, "extra"},
	{"unknown", "in target", []edit{set("target.owner", `"x"`)}, api.CodeUnknownField, "target.owner"},
	{"unknown", "in time_window (a typo must not drop a deadline)", []edit{set("time_window.valid_untill_ms", "1")}, api.CodeUnknownField, "time_window.valid_untill_ms"},
	{"unknown", "in a precondition", []edit{set("preconditions[0].note", `"x"`)}, api.CodeUnknownField, "preconditions[0].note"},
	{"unknown", "free-form parameters may have anything", []edit{set("parameters", `{"zeta":{"anything":[1,"two",null]}}`)}, "", ""},
	{"unknown", "case matters", []edit{set("Proposal_ID", `"p-1"`)}, api.CodeUnknownField, "Proposal_ID"},

	{RuleProposalID, "unicode id", []edit{set("proposal_id", `"提案-1 ✓"`)}, "", ""},
	{RuleProposalID, "256-byte id", []edit{set("proposal_id", `"`+strings.Repeat("a", MaxIDBytes)+`"`)}, "", ""},
	{RuleProposalID, "missing", []edit{del("proposal_id")}, RuleProposalID, "proposal_id"},
	{RuleProposalID, "null", []edit{set("proposal_id", "null")}, RuleProposalID, "proposal_id"},
	{RuleProposalID, "empty", []edit{set("proposal_id", `""`)}, RuleProposalID, "proposal_id"},
	{RuleProposalID, "number", []edit{set("proposal_id", "5")}, RuleProposalID, "proposal_id"},
	{RuleProposalID, "too long", []edit{set("proposal_id", `"`+strings.Repeat("a", MaxIDBytes+1)+`"`)}, RuleProposalID, "proposal_id"},
	{RuleProposalID, "control character", []edit{set("proposal_id", `"p\n1"`)}, RuleProposalID, "proposal_id"},

	{RuleTSms, "one", []edit{set("ts_ms", "1")}, "", ""},
	{RuleTSms, "missing", []edit{del("ts_ms")}, RuleTSms, "ts_ms"},
	{RuleTSms, "zero", []edit{set("ts_ms", "0")}, RuleTSms, "ts_ms"},
	{RuleTSms, "negative", []edit{set("ts_ms", "-5")}, RuleTSms, "ts_ms"},
	{RuleTSms, "fraction", []edit{set("ts_ms", "1.5")}, RuleTSms, "ts_ms"},
	{RuleTSms, "integral fraction", []edit{set("ts_ms", "1705171200000.0")}, RuleTSms, "ts_ms"},
	{RuleTSms, "exponent", []edit{set("ts_ms", "1e12")}, RuleTSms, "ts_ms"},
	{RuleTSms, "string", []edit{set("ts_ms", `"1705171200000"`)}, RuleTSms, "ts_ms"},
	{RuleTSms, "out of int64", []edit{set("ts_ms", "99999999999999999999")}, RuleTSms, "ts_ms"},

	{RuleActor, "with spaces", []edit{set("actor", `"agent one"`)}, "", ""},
	{RuleActor, "missing", []edit{del("actor")}, RuleActor, "actor"},
	{RuleActor, "empty", []edit{set("actor", `""`)}, RuleActor, "actor"},
	{RuleActor, "object", []edit{set("actor", `{"id":"a"}`)}, RuleActor, "actor"},

	{RuleActionType, "custom", []edit{set("action_type", `"custom"`)}, "", ""},
	{RuleActionType, "missing", []edit{del("action_type")}, RuleActionType, "action_type"},
	{RuleActionType, "unknown value", []edit{set("action_type", `"delete_all"`)}, RuleActionType, "action_type"},
	{RuleActionType, "wrong case", []edit{set("action_type", `"WRITE"`)}, RuleActionType, "action_type"},
	{RuleActionType, "number", []edit{set("action_type", "4")}, RuleActionType, "action_type"},

	{RuleTarget, "empty constraints", []edit{set("target.constraints", "{}")}, "", ""},
	{RuleTarget, "missing", []edit{del("target")}, RuleTarget, "target"},
	{RuleTarget, "string", []edit{set("target", `"crm_record/c-1"`)}, RuleTarget, "target"},
	{RuleTarget, "missing domain", []edit{del("target.domain")}, RuleTarget, "target.domain"},
	{RuleTarget, "empty resource_type", []edit{set("target.resource_type", `""`)}, RuleTarget, "target.resource_type"},
	{RuleTarget, "numeric resource_id", []edit{set("target.resource_id", "12345")}, RuleTarget, "target.resource_id"},
	{RuleTarget, "domain not a string", []edit{set("target.domain", "5")}, RuleTarget, "target.domain"},
	{RuleTarget, "constraints not an object", []edit{set("target.constraints", `["email"]`)}, RuleTarget, "target.constraints"},

	{RuleParameters, "empty object", []edit{set("parameters", "{}")}, "", ""},
	{RuleParameters, "missing", []edit{del("parameters")}, RuleParameters, "parameters"},
	{RuleParameters, "null", []edit{set("parameters", "null")}, RuleParameters, "parameters"},
	{RuleParameters, "array", []edit{set("parameters", `[{"a":1}]`)}, RuleParameters, "parameters"},
	{RuleParameters, "string", []edit{set("parameters", `"email=a@b.c"`)}, RuleParameters, "parameters"},

	{RuleValidUntil, "one millisecond ahead", []edit{set("time_window.valid_until_ms", strconv.FormatInt(kernelNow.UnixMilli()+1, 10))}, "", ""},
	{RuleValidUntil, "equal to now", []edit{set("time_window.valid_until_ms", strconv.FormatInt(kernelNow.UnixMilli(), 10))}, RuleValidUntil, "time_window.valid_until_ms"},
	{RuleValidUntil, "in the past", []edit{set("time_window.valid_until_ms", "1705171200001")}, RuleValidUntil, "time_window.valid_until_ms"},
	{RuleValidUntil, "missing", []edit{del("time_window.valid_until_ms")}, RuleValidUntil, "time_window.valid_until_ms"},
	{RuleValidUntil, "fraction", []edit{set("time_window.valid_until_ms", "1705171500000.5")}, RuleValidUntil, "time_window.valid_until_ms"},
	{RuleValidUntil, "string", []edit{set("time_window.valid_until_ms", `"1705171500000"`)}, RuleValidUntil, "time_window.valid_until_ms"},
	{RuleValidUntil, "window not an object", []edit{set("time_window", "[1705171200000,1705171500000]")}, RuleValidUntil, "time_window"},
	{RuleValidUntil, "max_duration zero", []edit{set("time_window.max_duration_ms", "0")}, RuleValidUntil, "time_window.max_duration_ms"},
	{RuleValidUntil, "max_duration fraction", []edit{set("time_window.max_duration_ms", "1.5")}, RuleValidUntil, "time_window.max_duration_ms"},
	{RuleValidUntil, "max_duration absent", []edit{del("time_window.max_duration_ms")}, "", ""},

	{RuleValidFrom, "from equals until", []edit{set("time_window.valid_from_ms", "1705171500000")}, "", ""},
	{RuleValidFrom, "from after until", []edit{set("time_window.valid_from_ms", "1705171500001")}, RuleValidFrom, "time_window.valid_from_ms"},
	{RuleValidFrom, "missing from", []edit{del("time_window.valid_from_ms")}, RuleValidFrom, "time_window.valid_from_ms"},
	{RuleValidFrom, "from a string", []edit{set("time_window.valid_from_ms", `"now"`)}, RuleValidFrom, "time_window.valid_from_ms"},

	{RuleRisk, "lists and flag optional", []edit{set("risk_envelope", `{"max_affected_records":3}`)}, "", ""},
	{RuleRisk, "zero records", []edit{set("risk_envelope.max_affected_records", "0")}, RuleRisk, "risk_envelope.max_affected_records"},
	{RuleRisk, "negative records", []edit{set("risk_envelope.max_affected_records", "-3")}, RuleRisk, "risk_envelope.max_affected_records"},
	{RuleRisk, "records missing", []edit{del("risk_envelope.max_affected_records")}, RuleRisk, "risk_envelope.max_affected_records"},
	{RuleRisk, "records a string", []edit{set("risk_envelope.max_affected_records", `"1"`)}, RuleRisk, "risk_envelope.max_affected_records"},
	{RuleRisk, "envelope a string", []edit{set("risk_envelope", `"low"`)}, RuleRisk, "risk_envelope"},
	{RuleRisk, "effect not a string", []edit{set("risk_envelope.allowed_side_effects", `["log",1]`)}, RuleRisk, "risk_envelope.allowed_side_effects[1]"},
	{RuleRisk, "reversible not a boolean", []edit{set("risk_envelope.reversible_required", `"yes"`)}, RuleRisk, "risk_envelope.reversible_required"},

	{RuleEvidence, "no bindings: external evidence packet (the seed's own style)", []edit{del("evidence_bindings")}, "", ""},
	{RuleEvidence, "null value", []edit{set("preconditions[0].value", "null")}, "", ""},
	{RuleEvidence, "ref names no binding", []edit{set("preconditions[0].evidence_ref", `"ev-2"`)}, RuleEvidence, "preconditions[0].evidence_ref"},
	{RuleEvidence, "bindings declared empty", []edit{set("evidence_bindings", "[]")}, RuleEvidence, "preconditions[0].evidence_ref"},
	{RuleEvidence, "duplicate binding ref", []edit{set("evidence_bindings", `[{"ref":"ev-1"},{"ref":"ev-1"}]`)}, RuleEvidence, "evidence_bindings[1].ref"},
	{RuleEvidence, "binding without ref", []edit{set("evidence_bindings", `[{"source":"x"}]`)}, RuleEvidence, "evidence_bindings[0].ref"},
	{RuleEvidence, "bindings an object", []edit{set("evidence_bindings", `{"ev-1":{}}`)}, RuleEvidence, "evidence_bindings"},
	{RuleEvidence, "precondition without evidence_ref", []edit{del("preconditions[0].evidence_ref")}, RuleEvidence, "preconditions[0].evidence_ref"},
	{RuleEvidence, "precondition without value", []edit{del("preconditions[0].value")}, RuleEvidence, "preconditions[0].value"},
	{RuleEvidence, "unknown operator", []edit{set("preconditions[0].operator", `"approx"`)}, RuleEvidence, "preconditions[0].operator"},
	{RuleEvidence, "preconditions an object", []edit{set("preconditions", `{"field":"x"}`)}, RuleEvidence, "preconditions"},

	{RuleApproval, "threshold N of M with the proposer listed", []edit{set("approval", `{"required":2,"approvers":["agent-1","alice","bob"]}`)}, "", ""},
	{RuleApproval, "dual without a list", []edit{set("approval_class", `"dual"`), del("approval")}, "", ""},
	{RuleApproval, "dual with two approvers", []edit{set("approval_class", `"dual"`), set("approval", `{"approvers":["alice","bob"]}`)}, "", ""},
	{RuleApproval, "single with a list", []edit{set("approval_class", `"single"`), set("approval", `{"required":1,"approvers":["bob"]}`)}, "", ""},
	{RuleApproval, "none explicit", []edit{set("approval_class", `"none"`), del("approval")}, "", ""},
	{RuleApproval, "unknown class", []edit{set("approval_class", `"quorum"`)}, RuleApproval, "approval_class"},
	{RuleApproval, "threshold without approval", []edit{del("approval")}, RuleApproval, "approval"},
	{RuleApproval, "threshold without required", []edit{del("approval.required")}, RuleApproval, "approval.required"},
	{RuleApproval, "threshold without approvers", []edit{del("approval.approvers")}, RuleApproval, "approval.approvers"},
	{RuleApproval, "threshold N > M", []edit{set("approval.required", "4")}, RuleApproval, "approval.required"},
	{RuleApproval, "threshold N zero", []edit{set("approval.required", "0")}, RuleApproval, "approval.required"},
	{RuleApproval, "threshold N fraction", []edit{set("approval.required", "1.5")}, RuleApproval, "approval.required"},
	{RuleApproval, "proposer does not count toward M", []edit{set("approval", `{"required":2,"approvers":["agent-1","alice"]}`)}, RuleApproval, "approval.required"},
	{RuleApproval, "duplicate approver", []edit{set("approval.approvers", `["alice","bob","alice"]`)}, RuleApproval, "approval.approvers[2]"},
	{RuleApproval, "empty approver", []edit{set("approval.approvers", `["alice",""]`)}, RuleApproval, "approval.approvers[1]"},
	{RuleApproval, "empty approvers list", []edit{set("approval_class", `"single"`), set("approval", `{"approvers":[]}`)}, RuleApproval, "approval.approvers"},
	{RuleApproval, "dual with one eligible approver", []edit{set("approval_class", `"dual"`), set("approval", `{"approvers":["agent-1","alice"]}`)}, RuleApproval, "approval.approvers"},
	{RuleApproval, "single listing only the proposer", []edit{set("approval_class", `"single"`), set("approval", `{"approvers":["agent-1"]}`)}, RuleApproval, "approval.approvers"},
	{RuleApproval, "dual with required 3", []edit{set("approval_class", `"dual"`), set("approval", `{"required":3}`)}, RuleApproval, "approval.required"},
	{RuleApproval, "none with approval parameters", []edit{set("approval_class", `"none"`)}, RuleApproval, "approval"},
	{RuleApproval, "absent class with approval parameters", []edit{del("approval_class")}, RuleApproval, "approval"},

	{"rollback", "strategy only", []edit{set("rollback_semantics", `{"strategy":"manual"}`)}, "", ""},
	{"rollback", "unknown strategy", []edit{set("rollback_semantics.strategy", `"undo"`)}, api.CodeBadValue, "rollback_semantics.strategy"},
	{"rollback", "no strategy", []edit{del("rollback_semantics.strategy")}, api.CodeMissingField, "rollback_semantics.strategy"},
	{"rollback", "action a string", []edit{set("rollback_semantics.action", `"restore"`)}, api.CodeWrongType, "rollback_semantics.action"},
	{"rollback", "not an object", []edit{set("rollback_semantics", `"none"`)}, api.CodeWrongType, "rollback_semantics"},
}

// TestKernelRules runs every rule case through the three ways a payload is
// judged: ValidateKernel on the bare object, Decode of an envelope carrying
// it (Field prefixed "payload."), and WrapKernel (Field relative to the bare
// object).
func TestKernelRules(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.rule+"/"+tc.name, func(t *testing.T) {
			payload := mutate(t, kBase, tc.edits...)
			opts := KernelOptions{Now: kernelNow}

			k, err := ValidateKernel([]byte(payload), opts)
			checkRefusal(t, "ValidateKernel", err, tc.code, tc.field)
			if tc.code == "" && k == nil {
				t.Fatal("accepted without a proposal")
			}

			id, from := envFor(payload)
			d, err := Decode(kernelEnvelope(id, from, payload), DecodeOptions{Now: kernelNow})
			wantField := ""
			if tc.code != "" {
				wantField = payloadPath(tc.field)
			}
			checkRefusal(t, "Decode", err, tc.code, wantField)
			if tc.code == "" && !reflect.DeepEqual(d.Kernel, k) {
				t.Fatalf("Decode's Kernel differs from ValidateKernel's:\n%+v\n%+v", d.Kernel, k)
			}

			_, err = WrapKernel([]byte(payload), WrapOptions{Now: kernelNow})
			checkRefusal(t, "WrapKernel", err, tc.code, tc.field)
		})
	}
}

// TestKernelRuleCoverage checks the table has a passing and a failing case
// for every rule.
func TestKernelRuleCoverage(t *testing.T) {
	for _, rule := range []string{RuleProposalID, RuleTSms, RuleActor, RuleActionType, RuleTarget, RuleParameters,
		RuleValidUntil, RuleValidFrom, RuleRisk, RuleEvidence, RuleApproval} {
		var pass, fail bool
		for _, tc := range ruleCases {
			if tc.rule != rule {
				continue
			}
			if tc.code == "" {
				pass = true
			} else if tc.code == rule {
				fail = true
			}
		}
		if !pass || !fail {
			t.Errorf("rule %s: passing case %t, failing case %t", rule, pass, fail)
		}
	}
}

func checkRefusal(t *testing.T, what string, err error, code, field string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("%s refused: %v", what, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s accepted, want %s at %q", what, code, field)
	}
	r, ok := err.(*RefusalError)
	if !ok || !errors.Is(err, ErrRefused) {
		t.Fatalf("%s: error %T %v is not a *RefusalError", what, err, err)
	}
	if r.Code != code || r.Field != field || r.Message == "" {
		t.Fatalf("%s: refusal %q field %q (%s), want %q field %q", what, r.Code, r.Field, r.Message, code, field)
	}
}

// TestKernelEnvelopeBinding: the envelope's id is the proposal's id and its
// from is the actor; a payload naming another is refused.
func TestKernelEnvelopeBinding(t *testing.T) {
	payload := mutate(t, kBase)
	tests := []struct {
		name, id, from, code, field string
	}{
		{"bound", "p-1", "agent-1", "", ""},
		{"id differs", "p-2", "agent-1", RuleProposalID, "payload.proposal_id"},
		{"actor spoofs another sender", "p-1", "mallory", RuleActor, "payload.actor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(kernelEnvelope(tc.id, tc.from, payload), DecodeOptions{Now: kernelNow})
			checkRefusal(t, "Decode", err, tc.code, tc.field)
		})
	}
	t.Run("WrapKernel sender", func(t *testing.T) {
		_, err := WrapKernel([]byte(payload), WrapOptions{Now: kernelNow, Sender: "mallory"})
		checkRefusal(t, "WrapKernel", err, RuleActor, "actor")
		if _, err := WrapKernel([]byte(payload), WrapOptions{Now: kernelNow, Sender: "agent-1"}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestKernelNoCurrentTime: without a current time a time_window cannot be
// checked, so the proposal is refused (fail closed); without a time_window
// there is nothing to check.
func TestKernelNoCurrentTime(t *testing.T) {
	_, err := ValidateKernel([]byte(kBase), KernelOptions{})
	checkRefusal(t, "ValidateKernel", err, RuleValidUntil, "time_window.valid_until_ms")
	if _, err := ValidateKernel([]byte(mutate(t, kBase, del("time_window"))), KernelOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestKernelNotAnObject covers payloads that are not a JSON object at all.
func TestKernelNotAnObject(t *testing.T) {
	tests := []struct{ raw, code, field string }{
		{`[]`, api.CodeWrongType, ""},
		{`"p-1"`, api.CodeWrongType, ""},
		{`{"proposal_id":"p-1","proposal_id":"p-2"}`, api.CodeNotJSON, "proposal_id"},
		{`{"proposal_id":`, api.CodeNotJSON, "proposal_id"},
		{"{\"proposal_id\":\"\xff\"}", api.CodeInvalidUTF8, ""},
		{``, api.CodeNotJSON, ""},
	}
	for _, tc := range tests {
		_, err := ValidateKernel([]byte(tc.raw), KernelOptions{Now: kernelNow})
		checkRefusal(t, tc.raw, err, tc.code, tc.field)
	}
}

// TestKernelSeedExample: the seed's JSON example, byte for byte, is accepted
// while its window is open and refused (V-PROP-010) once it has closed.
func TestKernelSeedExample(t *testing.T) {
	seedRaw, err := os.ReadFile(filepath.Join("testdata", "kernel", "seed-proposal.json"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := ValidateKernel(seedRaw, KernelOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	want := &KernelProposal{
		ProposalID: "550e8400-e29b-41d4-a716-446655440000", TSms: 1705171200000, Actor: "agent-sales-001",
		ActionType: api.ActionWrite,
		Target: &api.KernelTarget{ResourceType: "crm_record", ResourceID: "contact-12345", Domain: "salesforce.com",
			Constraints: json.RawMessage(`{"allowed_fields":["email","phone","notes"],"forbidden_fields":["ssn","credit_card"]}`)},
		Parameters:    json.RawMessage(`{"updates":{"email":"new@example.com","notes":"Updated via automation"}}`),
		Preconditions: []Precondition{{Field: "record_exists", Operator: "eq", Value: json.RawMessage(`true`), EvidenceRef: "evidence-001"}},
		RiskEnvelope: &RiskEnvelope{AllowedSideEffects: []string{"audit_log_entry"}, ForbiddenEffects: []string{"email_notification", "workflow_trigger"},
			MaxAffectedRecords: &one, ReversibleRequired: true},
		TimeWindow:    &TimeWindow{ValidFromMs: 1705171200000, ValidUntilMs: 1705171500000, MaxDurationMs: 30000},
		ApprovalClass: api.ApprovalNone,
	}
	if !reflect.DeepEqual(k, want) {
		t.Fatalf("seed example decoded as\n%+v\nwant\n%+v", k, want)
	}
	if k.Method() != "kernel/write" {
		t.Fatalf("method %q", k.Method())
	}

	env, err := WrapKernel(seedRaw, WrapOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(env, DecodeOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != TypeProposal || d.Env.ID != want.ProposalID || d.Env.From != want.Actor || d.Method != "kernel/write" ||
		string(d.Params) != string(want.Parameters) || !reflect.DeepEqual(d.Kernel, want) {
		t.Fatalf("wrapped seed decoded wrong: %+v", d)
	}

	closed := time.UnixMilli(1705171500000).UTC() // valid_until_ms itself: no longer valid
	_, err = ValidateKernel(seedRaw, KernelOptions{Now: closed})
	checkRefusal(t, "ValidateKernel after the window", err, RuleValidUntil, "time_window.valid_until_ms")
	_, err = WrapKernel(seedRaw, WrapOptions{Now: closed})
	checkRefusal(t, "WrapKernel after the window", err, RuleValidUntil, "time_window.valid_until_ms")
}

// TestKernelTestdata: every proposal under testdata/kernel validates, and
// its typed view marshals to a Proposal that validates to the same view.
func TestKernelTestdata(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "kernel", "*.json"))
	if len(files) < 4 {
		t.Fatalf("testdata/kernel has %d files", len(files))
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			k, err := ValidateKernel(raw, KernelOptions{Now: kernelNow})
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, k, KernelOptions{Now: kernelNow})
		})
	}
}

// checkRoundTrip marshals k and validates it again: the same typed view
// (Request aside: the marshalled form is a Proposal).
func checkRoundTrip(t *testing.T, k *KernelProposal, opts KernelOptions) {
	t.Helper()
	b, err := json.Marshal(k)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	k2, err := ValidateKernel(b, opts)
	if err != nil {
		t.Fatalf("marshalled view %s does not validate: %v", b, err)
	}
	want := *k
	want.Request = nil
	if !reflect.DeepEqual(k2, &want) {
		t.Fatalf("round trip changed the proposal:\n%s\n%+v\n%+v", b, k2, &want)
	}
	b2, _ := json.Marshal(k2)
	if string(b2) != string(b) {
		t.Fatalf("marshal not stable:\n%s\n%s", b, b2)
	}
}

// TestKernelDeterministic: map order never leaks into results.
func TestKernelDeterministic(t *testing.T) {
	raw := mutate(t, kBase, set("b1", "1"), set("a1", "2"), set("c1", "3"))
	var first *RefusalError
	for range 50 {
		_, err := ValidateKernel([]byte(raw), KernelOptions{Now: kernelNow})
		r, _ := AsRefusal(err)
		if first == nil {
			first = r
		} else if *r != *first {
			t.Fatalf("refusal differs between runs: %v vs %v", r, first)
		}
	}
	if first.Field != "a1" || first.Code != api.CodeUnknownField {
		t.Fatalf("refusal %v, want the first unknown member in key order", first)
	}
}

func TestIsBareKernel(t *testing.T) {
	tests := []struct {
		raw  string
		want bool
	}{
		{kBase, true},
		{`{"request_id":"r1","intent":"x"}`, true},
		{string(kernelEnvelope("p-1", "agent-1", kBase)), false},
		{`{"protocol":"mew/v0.4","proposal_id":"p"}`, false},
		{`{"id":"x"}`, false},
		{`[]`, false},
		{`nope`, false},
	}
	for _, tc := range tests {
		if got := IsBareKernel([]byte(tc.raw)); got != tc.want {
			t.Errorf("IsBareKernel(%.60s) = %t", tc.raw, got)
		}
	}
}
