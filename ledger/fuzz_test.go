package ledger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// fuzzSeeds are extra starting points besides testdata/envelopes and the
// corpus in testdata/fuzz/FuzzDecode: the contract §2 example and edge cases.
var fuzzSeeds = []string{
	`{"protocol":"mew/v0.4","id":"env-req-1","ts":"2026-01-02T03:04:05Z","from":"untrusted-agent",
 "to":["target-agent"],"kind":"mcp/proposal","correlation_id":["..."],"context":"optional",
 "payload":{"method":"tools/call","params":{"name":"write_file","arguments":{}}}}`,
	`{"protocol":"mcpx/v0.1","id":"p","from":"a","kind":"mcp/proposal:tools/call:ctx","payload":{"params":{"b":[1,2],"a":"\u00e9"},"ttl_ms":1000}}`,
	`{"protocol":"mcpx/v0.1","id":"w","from":"a","kind":"proposal/withdraw","payload":{"proposalId":"p","reason":"busy"}}`,
	`{"protocol":"mcpx/v0.1","id":"r","from":"a","kind":"proposal-reject","correlation_id":["p","q"],"payload":{"proposal_id":"q"}}`,
	`{"protocol":"meup/v0.1","id":"c","from":"a","kind":"chat","correlationId":["r","r"],"payload":{"message":"why"}}`,
	`{"protocol":"mew/v0.4","id":"s","from":"a","kind":"mcp/response","correlation_id":"f","payload":{"error":null,"result":1}}`,
	`{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{"method":"m","method":"n"}}`,
	`{"protocol":"mew/v0.4","id":"x\u0000","from":"a","kind":"chat"}`,
	`{"protocol":"mew/v0.4","id":"k","from":"a","kind":"kernel/proposal","payload":{"proposal_id":"k","action_type":"read","parameters":null}}`,
	`{"protocol":"mew/v0.4","id":"n","from":"a","kind":"chat","to":null,"ts":null,"context":null,"correlation_id":null,"payload":null}`,
	`[]`, `{}`, `{"protocol":"mew/v0.4"}`, "{\"protocol\":\"mew/v0.4\",\"id\":\"\xff\"}",
}

// FuzzDecode checks that Decode never panics and either refuses with a
// *RefusalError or returns a Decoded that is internally consistent and whose
// normalised envelope, marshalled and decoded again, is the same event.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "envelopes", "*.json"))
	forms, _ := filepath.Glob(filepath.Join("testdata", "forms", "*.json")) // the seeds' lifecycle forms, gaps
	files = append(files, forms...)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Add(ExpireEnvelope("default", "env-req-1", deadline))

	f.Fuzz(func(t *testing.T, raw []byte) {
		opts := DecodeOptions{Now: deadline}
		d, err := Decode(raw, opts)
		if err != nil {
			if d != nil {
				t.Fatal("both a Decoded and an error")
			}
			r, ok := err.(*RefusalError)
			if !ok || r.Code == "" || r.Message == "" {
				t.Fatalf("error is not a complete *RefusalError: %#v", err)
			}
			return
		}
		checkDecoded(t, d)
		_ = Submittable(d)
		_ = DefaultSubmitLimits().Check(raw, d)

		again, err := Decode(raw, opts)
		if err != nil || !reflect.DeepEqual(again, d) {
			t.Fatalf("Decode not deterministic: %+v vs %+v (%v)", d, again, err)
		}

		b, err := json.Marshal(&d.Env)
		if err != nil {
			t.Fatalf("marshal normalised envelope: %v", err)
		}
		d2, err := Decode(b, opts)
		if err != nil {
			t.Fatalf("normalised envelope %s of %q does not decode: %v", b, raw, err)
		}
		if d2.Digest != d.Digest || d2.Type != d.Type || d2.Key != d.Key || !slices.Equal(d2.Targets, d.Targets) ||
			d2.Method != d.Method || d2.Reason != d.Reason || d2.Text != d.Text || d2.Outcome != d.Outcome || d2.TTLms != d.TTLms {
			t.Fatalf("round trip changed the event:\nraw    %q\nnorm   %s\nfirst  %+v\nsecond %+v", raw, b, d, d2)
		}
	})
}

// checkDecoded checks the invariants every successful Decode guarantees.
func checkDecoded(t *testing.T, d *Decoded) {
	t.Helper()
	e := &d.Env
	if e.Protocol != DialectMEW04 || !slices.Contains(Dialects, d.Dialect) {
		t.Fatalf("protocol %q dialect %q", e.Protocol, d.Dialect)
	}
	if e.ID == "" || e.From == "" || e.Kind == "" || d.OrigKind == "" || len(e.From) > MaxIDBytes || len(e.ID) > MaxExpireIDBytes {
		t.Fatalf("bad id/from/kind: %+v", e)
	}
	if d.Type != TypeIgnored && !d.Type.Valid() {
		t.Fatalf("type %q", d.Type)
	}
	if len(d.Digest) != 64 {
		t.Fatalf("digest %q", d.Digest)
	}
	if e.To != nil && len(e.To) == 0 || e.CorrelationID != nil && len(e.CorrelationID) == 0 {
		t.Fatalf("empty non-nil list: %+v", e)
	}
	for i, c := range e.CorrelationID {
		if c == "" || len(c) > MaxIDBytes || slices.Index(e.CorrelationID, c) != i {
			t.Fatalf("correlation ids %q", e.CorrelationID)
		}
	}
	for _, x := range d.Targets {
		if !slices.Contains(e.CorrelationID, x) {
			t.Fatalf("target %q not in correlation_id %q", x, e.CorrelationID)
		}
	}
	switch d.Type {
	case TypeProposal:
		if d.Key != e.ID || len(d.Targets) != 0 || d.Method == "" {
			t.Fatalf("proposal key %q targets %q method %q", d.Key, d.Targets, d.Method)
		}
	case TypeWithdraw, TypeReject, TypeApprove:
		if !slices.Equal(d.Targets, e.CorrelationID) || d.Key != e.CorrelationID[0] {
			t.Fatalf("%s targets %q key %q", d.Type, d.Targets, d.Key)
		}
	case TypeFulfil, TypeResponse, TypeNote, TypeExpire:
		if len(d.Targets) != 1 || d.Targets[0] != e.CorrelationID[0] || d.Key != d.Targets[0] {
			t.Fatalf("%s targets %q key %q", d.Type, d.Targets, d.Key)
		}
	case TypeIgnored:
		if len(d.Targets) != 0 {
			t.Fatalf("ignored with targets %q", d.Targets)
		}
	}
	if e.Payload != nil && !json.Valid(e.Payload) {
		t.Fatalf("payload not JSON: %q", e.Payload)
	}
}
