package ledger

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/subjects"
)

// prepareBody is PrepareBodyStandalone with the default limits and
// kernelNow as the clock: what an Appender's PrepareBody does with those
// options.
func prepareBody(space string, body []byte, o BodyOptions) (*Prepared, error) {
	return PrepareBodyStandalone(space, body, o, SubmitLimits{}, kernelNow)
}

// TestPrepareBodyDecodesOnce (issue 18): a bare kernel submission is
// validated once and its envelope decoded once on its way to the group
// commit (it was three of each: WrapKernel's validation and Decode, then
// Prepare's Decode, which validated the payload again), and the result is
// what WrapKernel then Prepare gave. An envelope is decoded once, a
// kernel envelope's payload validated once.
func TestPrepareBodyDecodesOnce(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "kernel", "*.json"))
	if len(files) == 0 {
		t.Fatal("no testdata/kernel files")
	}
	for _, name := range files {
		bare, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var p *Prepared
		dec, val := TestOnlyCountDecodes(func() { p, err = prepareBody("", bare, BodyOptions{}) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if dec != 1 || val != 1 {
			t.Fatalf("%s: PrepareBody decoded the envelope %d times and validated the kernel payload %d times, want 1 and 1", name, dec, val)
		}
		env, err := WrapKernel(bare, WrapOptions{Now: kernelNow})
		if err != nil {
			t.Fatal(err)
		}
		want, err := PrepareStandalone("", env, SubmitLimits{}, kernelNow)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("%s: PrepareBody gave\n%+v\nWrapKernel then Prepare\n%+v", name, p, want)
		}

		// The wrapped envelope sent as an envelope: one decode, one
		// validation.
		dec, val = TestOnlyCountDecodes(func() { _, err = prepareBody("", env, BodyOptions{}) })
		if err != nil || dec != 1 || val != 1 {
			t.Fatalf("%s as an envelope: %d decodes, %d validations (%v), want 1 and 1", name, dec, val, err)
		}
	}
	plain := []byte(`{"protocol":"mew/v0.4","id":"e-1","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`)
	dec, val := TestOnlyCountDecodes(func() {
		if _, err := prepareBody("", plain, BodyOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if dec != 1 || val != 0 {
		t.Fatalf("an mcp/proposal envelope: %d decodes, %d validations, want 1 and 0", dec, val)
	}
}

// TestPrepareBodyRefusals: the one entry refuses as the separate steps
// did: a bare body with WrapKernel's code and field (also when forced
// with Kernel), an envelope with Prepare's, and a history-mode sender
// that is the ledger's own or not an id.
func TestPrepareBodyRefusals(t *testing.T) {
	tests := []struct {
		name, body string
		o          BodyOptions
		code       string
		field      string
	}{
		{"bare kernel rule", mutate(t, kBase, set("target.domain", `""`)), BodyOptions{}, RuleTarget, "target.domain"},
		{"forced kernel, not JSON", `{"proposal_id":`, BodyOptions{Kernel: true}, api.CodeNotJSON, "proposal_id"},
		{"forced kernel, an envelope", string(kernelEnvelope("p-1", "agent-1", kBase)), BodyOptions{Kernel: true}, api.CodeUnknownField, "from"},
		{"envelope without id", `{"protocol":"mew/v0.4","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, BodyOptions{}, api.CodeMissingField, "id"},
		{"not lifecycle", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"presence"}`, BodyOptions{}, api.CodeNotLifecycle, "kind"},
		{"ledger as sender", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, BodyOptions{Sender: LedgerSender}, api.CodeReservedSender, "from"},
		{"sender with a control character", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, BodyOptions{Sender: "a\x01"}, api.CodeBadValue, "from"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := prepareBody("", []byte(tc.body), tc.o)
			if p != nil {
				t.Fatal("prepared with a refusal")
			}
			checkRefusal(t, "PrepareBody", err, tc.code, tc.field)
		})
	}

	// History mode: the subject's sender token is the sender given.
	p, err := prepareBody("s", []byte(`{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`), BodyOptions{Sender: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (subjects.Event{Space: "s", Key: "x", Type: string(TypeProposal), Sender: "b"}).String(); p.Subject != want {
		t.Fatalf("subject %s, want %s", p.Subject, want)
	}
}

// BenchmarkPrepareBodyKernel compares the one entry with what the submit
// paths did before it (WrapKernel, then Prepare) on the seed's proposal.
func BenchmarkPrepareBodyKernel(b *testing.B) {
	bare, err := os.ReadFile(filepath.Join("testdata", "kernel", "seed-proposal.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("wrap-then-prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			env, err := WrapKernel(bare, WrapOptions{Now: kernelNow})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := PrepareStandalone("", env, SubmitLimits{}, kernelNow); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PrepareBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := prepareBody("", bare, BodyOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
