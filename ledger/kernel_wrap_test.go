package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
)

func TestWrapKernel(t *testing.T) {
	bare := `{"proposal_id":"p-9","ts_ms":1705171200000,"actor":"agent-1","action_type":"read","target":{"resource_type":"file","resource_id":"/a","domain":"fs"},"parameters":{}}`
	env, err := WrapKernel([]byte("\n  "+bare+"\n"), WrapOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"protocol":"mew/v0.4","id":"p-9","from":"agent-1","kind":"kernel/proposal","payload":` + bare + `}`
	if string(env) != want {
		t.Fatalf("WrapKernel =\n%s\nwant\n%s", env, want)
	}
	again, _ := WrapKernel([]byte(bare), WrapOptions{Now: kernelNow.Add(90 * 1e9)})
	if !bytes.Equal(again, env) {
		t.Fatal("WrapKernel output depends on more than the bare object")
	}
	d, err := Decode(env, DecodeOptions{Now: kernelNow})
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != TypeProposal || d.Key != "p-9" || d.Method != "kernel/read" || string(d.Env.Payload) != bare {
		t.Fatalf("decoded %+v", d)
	}
	if err := Submittable(d); err != nil {
		t.Fatal(err)
	}
}

// TestWrapKernelUntouched: the payload is the submitted bytes, whitespace,
// key order and escapes included, for each file of testdata/kernel.
func TestWrapKernelUntouched(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "kernel", "*.json"))
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		env, err := WrapKernel(raw, WrapOptions{Now: kernelNow})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Contains(env, bytes.TrimSpace(raw)) {
			t.Fatalf("%s: payload bytes were changed", name)
		}
		d, err := Decode(env, DecodeOptions{Now: kernelNow})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		k, _ := ValidateKernel(raw, KernelOptions{Now: kernelNow})
		if !reflect.DeepEqual(d.Kernel, k) || d.Env.ID != k.ProposalID || d.Env.From != k.Actor {
			t.Fatalf("%s: wrapped envelope decodes to %+v", name, d)
		}
	}
}

func TestWrapKernelRefusals(t *testing.T) {
	tests := []struct {
		name, bare, code, field string
	}{
		{"not JSON", `{"proposal_id":`, api.CodeNotJSON, "proposal_id"},
		{"empty", "  ", api.CodeNotJSON, ""},
		{"array", `[1]`, api.CodeWrongType, ""},
		{"an envelope, not a bare proposal", string(kernelEnvelope("p-1", "agent-1", kBase)), api.CodeUnknownField, "from"},
		{"nested rule: path relative to the bare object", mutate(t, kBase, set("target.domain", `""`)), RuleTarget, "target.domain"},
		{"oversize", `{"proposal_id":"p","pad":"` + strings.Repeat("x", MaxEnvelopeBytes) + `"}`, api.CodeOversize, ""},
		{"just under the limit, but the envelope is over", mutate(t, kBase, set("parameters", `{"pad":"`+strings.Repeat("x", MaxEnvelopeBytes-len(kBase))+`"}`)), api.CodeOversize, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := WrapKernel([]byte(tc.bare), WrapOptions{Now: kernelNow})
			if env != nil {
				t.Fatal("envelope returned with a refusal")
			}
			checkRefusal(t, "WrapKernel", err, tc.code, tc.field)
		})
	}
}
