package ledger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mewledger/ledger/api"
)

const kReq = `{"request_id":"req-1","ts_ms":1705171200000,"actor":"agent-1","intent":"Read the config",
 "tool_call":{"name":"read_file","params":{"path":"/etc/app.yaml"}},"params":{},"evidence":"ev-1"}`

// TestKernelRequestMapping checks the documented mapping of the older
// KernelRequest form, member by member.
func TestKernelRequestMapping(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "kernel", "kernel-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := ValidateKernel(raw, KernelOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	want := &KernelProposal{
		ProposalID: "req-001", TSms: 1705171200000, Actor: "agent-ops-7",
		ActionType:       api.ActionExecute,
		Target:           &api.KernelTarget{ResourceType: "tool", ResourceID: "read_file", Domain: "kernel_request"},
		Parameters:       json.RawMessage(`{"path":"/etc/app/config.yaml"}`),
		EvidenceBindings: []EvidenceBinding{{Ref: "ticket-42"}, {Ref: "runbook-7"}},
		ApprovalClass:    api.ApprovalNone,
		Request: &KernelRequest{
			RequestID: "req-001", TSms: 1705171200000, Actor: "agent-ops-7", Intent: "Read the deployment config",
			ToolCall: &ToolCall{Name: "read_file", Params: json.RawMessage(`{"path":"/etc/app/config.yaml"}`)},
			Params:   json.RawMessage(`{}`), Evidence: []string{"ticket-42", "runbook-7"},
		},
	}
	if !reflect.DeepEqual(k, want) {
		t.Fatalf("mapped as\n%+v\n%+v\nwant\n%+v\n%+v", k, k.Request, want, want.Request)
	}
	checkRoundTrip(t, k, KernelOptions{Now: kernelNow})

	// Through an envelope: the envelope id is the request_id.
	d, err := Decode(kernelEnvelope("req-001", "agent-ops-7", string(raw)), DecodeOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Kernel, want) || d.Method != "kernel/execute" || string(d.Params) != `{"path":"/etc/app/config.yaml"}` {
		t.Fatalf("decoded %+v method %q params %s", d.Kernel, d.Method, d.Params)
	}
	// Wrapped: id from request_id, from from actor.
	env, err := WrapKernel(raw, WrapOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	d, err = Decode(env, DecodeOptions{Now: kernelNow})
	if err != nil || d.Env.ID != "req-001" || d.Env.From != "agent-ops-7" || !reflect.DeepEqual(d.Kernel, want) {
		t.Fatalf("wrapped request decoded as %+v, %v", d, err)
	}
}

func TestKernelRequestCases(t *testing.T) {
	tests := []struct {
		name   string
		edits  []edit
		code   string
		field  string
		params string // the mapped parameters when accepted
		refs   []string
	}{
		{"tool_call.params used, empty params ignored", nil, "", "", `{"path":"/etc/app.yaml"}`, []string{"ev-1"}},
		{"only params", []edit{del("tool_call.params"), set("params", `{"b":2,"a":1}`)}, "", "", `{"a":1,"b":2}`, []string{"ev-1"}},
		{"both equal", []edit{set("params", `{"path":"/etc/app.yaml"}`)}, "", "", `{"path":"/etc/app.yaml"}`, []string{"ev-1"}},
		{"neither", []edit{del("tool_call.params"), del("params")}, "", "", `{}`, []string{"ev-1"}},
		{"evidence list", []edit{set("evidence", `["a","b"]`)}, "", "", `{"path":"/etc/app.yaml"}`, []string{"a", "b"}},
		{"no evidence", []edit{del("evidence")}, "", "", `{"path":"/etc/app.yaml"}`, nil},
		{"null evidence and params", []edit{set("evidence", "null"), set("params", "null")}, "", "", `{"path":"/etc/app.yaml"}`, nil},

		{"both differ", []edit{set("params", `{"path":"/etc/shadow"}`)}, RuleParameters, "params", "", nil},
		{"tool params not an object", []edit{set("tool_call.params", `["/etc"]`)}, RuleParameters, "tool_call.params", "", nil},
		{"params not an object", []edit{set("params", `"x"`)}, RuleParameters, "params", "", nil},
		{"intent only: no action to derive", []edit{del("tool_call")}, RuleActionType, "tool_call", "", nil},
		{"tool_call null", []edit{set("tool_call", "null")}, RuleActionType, "tool_call", "", nil},
		{"tool_call a string", []edit{set("tool_call", `"read_file"`)}, RuleActionType, "tool_call", "", nil},
		{"tool without name", []edit{del("tool_call.name")}, RuleTarget, "tool_call.name", "", nil},
		{"tool name empty", []edit{set("tool_call.name", `""`)}, RuleTarget, "tool_call.name", "", nil},
		{"unknown tool_call member", []edit{set("tool_call.timeout", "5")}, api.CodeUnknownField, "tool_call.timeout", "", nil},
		{"unknown member", []edit{set("target", `{}`)}, api.CodeUnknownField, "target", "", nil},
		{"both request_id and proposal_id: a Proposal with an unknown member", []edit{set("proposal_id", `"req-1"`)}, api.CodeUnknownField, "evidence", "", nil},
		{"empty request_id", []edit{set("request_id", `""`)}, RuleProposalID, "request_id", "", nil},
		{"ts_ms zero (the older form allowed it)", []edit{set("ts_ms", "0")}, RuleTSms, "ts_ms", "", nil},
		{"actor missing", []edit{del("actor")}, RuleActor, "actor", "", nil},
		{"evidence a number", []edit{set("evidence", "7")}, RuleEvidence, "evidence", "", nil},
		{"evidence repeated", []edit{set("evidence", `["a","a"]`)}, RuleEvidence, "evidence[1]", "", nil},
		{"evidence empty string", []edit{set("evidence", `""`)}, RuleEvidence, "evidence", "", nil},
		{"intent missing", []edit{del("intent")}, api.CodeMissingField, "intent", "", nil},
		{"intent empty", []edit{set("intent", `""`)}, api.CodeMissingField, "intent", "", nil},
		{"intent not a string", []edit{set("intent", `{"goal":"x"}`)}, api.CodeWrongType, "intent", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := mutate(t, kReq, tc.edits...)
			k, err := ValidateKernel([]byte(payload), KernelOptions{Now: kernelNow})
			checkRefusal(t, "ValidateKernel", err, tc.code, tc.field)
			id, from := envFor(payload)
			_, derr := Decode(kernelEnvelope(id, from, payload), DecodeOptions{Now: kernelNow})
			wantField := ""
			if tc.code != "" {
				wantField = payloadPath(tc.field)
			}
			checkRefusal(t, "Decode", derr, tc.code, wantField)
			if tc.code != "" {
				return
			}
			if string(k.Parameters) != tc.params {
				t.Fatalf("parameters %s, want %s", k.Parameters, tc.params)
			}
			var refs []string
			for _, b := range k.EvidenceBindings {
				refs = append(refs, b.Ref)
			}
			if !reflect.DeepEqual(refs, tc.refs) {
				t.Fatalf("evidence refs %q, want %q", refs, tc.refs)
			}
			checkRoundTrip(t, k, KernelOptions{Now: kernelNow})
		})
	}
}

// TestKernelRequestEnvelopeBinding: request_id is bound to the envelope id.
func TestKernelRequestEnvelopeBinding(t *testing.T) {
	_, err := Decode(kernelEnvelope("other", "agent-1", kReq), DecodeOptions{Now: kernelNow})
	checkRefusal(t, "Decode", err, RuleProposalID, "payload.request_id")
	_, err = Decode(kernelEnvelope("req-1", "mallory", kReq), DecodeOptions{Now: kernelNow})
	checkRefusal(t, "Decode", err, RuleActor, "payload.actor")
}
