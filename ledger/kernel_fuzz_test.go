package ledger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mewledger/ledger/api"
)

// FuzzKernel feeds arbitrary bytes to the kernel validation as a bare
// submission. It checks that nothing panics; that ValidateKernel and
// WrapKernel agree (a refusal is a complete *RefusalError, and both refuse
// the same payloads with the same code); and that an accepted proposal
// round-trips: its wrapped envelope decodes to the same typed view, and the
// typed view marshals to a Proposal that validates to the same view.
func FuzzKernel(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "kernel", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(kBase))
	f.Add([]byte(kReq))
	for _, tc := range ruleCases {
		f.Add([]byte(mutate(f, kBase, tc.edits...)))
	}
	f.Add([]byte(`{"proposal_id":"k","action_type":"read","parameters":null}`))
	f.Add([]byte(`{"request_id":"r","ts_ms":1,"actor":"a","intent":"i","tool_call":{"name":"t"},"evidence":["e"]}`))
	f.Add([]byte(`{}`))

	opts := KernelOptions{Now: kernelNow}
	f.Fuzz(func(t *testing.T, bare []byte) {
		k, err := ValidateKernel(bare, opts)
		env, werr := WrapKernel(bare, WrapOptions{Now: kernelNow})
		if err != nil {
			r, ok := err.(*RefusalError)
			if !ok || r.Code == "" || r.Message == "" || k != nil {
				t.Fatalf("not a complete refusal: %#v (proposal %v)", err, k)
			}
			wr, ok := werr.(*RefusalError)
			if !ok || env != nil {
				t.Fatalf("ValidateKernel refused (%v) but WrapKernel gave %q, %v", err, env, werr)
			}
			if wr.Code != r.Code && wr.Code != api.CodeOversize {
				t.Fatalf("ValidateKernel refused with %v, WrapKernel with %v", r, wr)
			}
			return
		}
		if werr != nil {
			if r, ok := AsRefusal(werr); ok && r.Code == api.CodeOversize {
				return // valid, but too big once wrapped
			}
			t.Fatalf("ValidateKernel accepted, WrapKernel refused: %v", werr)
		}
		again, _ := ValidateKernel(bare, opts)
		if !reflect.DeepEqual(again, k) {
			t.Fatal("ValidateKernel not deterministic")
		}
		d, err := Decode(env, DecodeOptions{Now: kernelNow})
		if err != nil {
			t.Fatalf("wrapped envelope %q does not decode: %v", env, err)
		}
		if !reflect.DeepEqual(d.Kernel, k) || d.Env.ID != k.ProposalID || d.Env.From != k.Actor || d.Method != k.Method() {
			t.Fatalf("wrapped envelope decodes to %+v, want %+v", d.Kernel, k)
		}
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		k2, err := ValidateKernel(b, opts)
		if err != nil {
			t.Fatalf("typed view %s does not validate: %v", b, err)
		}
		want := *k
		want.Request = nil
		if !reflect.DeepEqual(k2, &want) {
			t.Fatalf("round trip changed the proposal:\n%+v\n%+v", k2, &want)
		}
	})
}

// FuzzIsBareKernel checks IsBareKernel, which scans with jsonscan.go,
// against encoding/json decoding the object into a map.
func FuzzIsBareKernel(f *testing.F) {
	for _, s := range []string{`{"proposal_id":"p","actor":"a"}`, `{"request_id":"r"}`, ` {"protocol":"mew/v0.4","payload":{"proposal_id":"p"}}`,
		`{"pro\u0070osal_id":1}`, `null`, `[{"proposal_id":1}]`, `{"proposal_id":`, `{"a":"\"proposal_id\"","b":[{"request_id":2}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var top map[string]json.RawMessage
		want := false
		if json.Unmarshal(raw, &top) == nil && top != nil {
			_, proto := top["protocol"]
			_, p := top["proposal_id"]
			_, q := top["request_id"]
			want = !proto && (p || q)
		}
		if got := IsBareKernel(raw); got != want {
			t.Fatalf("IsBareKernel(%q) = %t, encoding/json says %t", raw, got, want)
		}
	})
}
