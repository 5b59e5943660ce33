package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
)

var testNow = time.Date(2024, 1, 13, 18, 41, 0, 0, time.UTC)

func decodeOK(t *testing.T, raw string) *Decoded {
	t.Helper()
	d, err := Decode([]byte(raw), DecodeOptions{Now: testNow})
	if err != nil {
		t.Fatalf("Decode(%s): %v", raw, err)
	}
	return d
}

func decodeRefused(t *testing.T, raw []byte) *RefusalError {
	t.Helper()
	d, err := Decode(raw, DecodeOptions{Now: testNow})
	if err == nil {
		t.Fatalf("Decode(%.200s) = %+v, want a refusal", raw, d)
	}
	if d != nil {
		t.Fatalf("Decode returned both a result and an error")
	}
	r, ok := err.(*RefusalError)
	if !ok {
		t.Fatalf("error %T %v is not a *RefusalError", err, err)
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("errors.Is(err, ErrRefused) = false")
	}
	if r.Message == "" || !strings.HasPrefix(r.Error(), "ledger: ") {
		t.Fatalf("refusal without message or package prefix: %v", r)
	}
	return r
}

func seed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "envelopes", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func canonEq(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	if want == "" {
		if got != nil {
			t.Errorf("%s = %s, want nil", what, got)
		}
		return
	}
	if !canon.Equal(got, []byte(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// TestDecodeSeeds decodes the example envelopes of the contract and the seeds in
// every dialect and checks the whole normalised result.
func TestDecodeSeeds(t *testing.T) {
	tests := []struct {
		file     string
		dialect  string
		kind     string // canonical
		origKind string
		typ      Type
		key      string
		targets  []string
		corr     []string
		to       []string
		context  string
		method   string
		params   string // canonical JSON, "" = nil
		reason   string
		text     string
		outcome  string
		ttl      int64
	}{
		{file: "spec-mew04-proposal.json", dialect: DialectMEW04, kind: KindProposal, origKind: "mcp/proposal", typ: TypeProposal,
			key: "env-req-1", corr: []string{"..."}, to: []string{"target-agent"}, context: "optional",
			method: "tools/call", params: `{"name":"write_file","arguments":{}}`},
		{file: "mew04-fulfil.json", dialect: DialectMEW04, kind: KindRequest, origKind: "mcp/request", typ: TypeFulfil,
			key: "env-req-1", targets: []string{"env-req-1"}, corr: []string{"env-req-1"}, to: []string{"target-agent"},
			method: "tools/call", params: `{"name":"write_file","arguments":{}}`},
		{file: "mew04-response.json", dialect: DialectMEW04, kind: KindResponse, origKind: "mcp/response", typ: TypeResponse,
			key: "env-fulfill-1", targets: []string{"env-fulfill-1"}, corr: []string{"env-fulfill-1"}, to: []string{"human-user"},
			outcome: "succeeded"},
		{file: "mew04-batch-withdraw.json", dialect: DialectMEW04, kind: KindWithdraw, origKind: "mcp/withdraw", typ: TypeWithdraw,
			key: "prop-1", targets: []string{"prop-1", "prop-2", "prop-3"}, corr: []string{"prop-1", "prop-2", "prop-3"},
			reason: "no_longer_needed"},
		{file: "mew03-reject.json", dialect: DialectMEW03, kind: KindReject, origKind: "mcp/reject", typ: TypeReject,
			key: "env-req-1", targets: []string{"env-req-1"}, corr: []string{"env-req-1"}, to: []string{"untrusted-agent"},
			reason: "unsafe"},
		{file: "meup02-chat.json", dialect: DialectMEUP02, kind: KindChat, origKind: "chat", typ: TypeNote,
			key: "reject-1", targets: []string{"reject-1"}, corr: []string{"reject-1"},
			text: "Writing there would overwrite the config."},
		{file: "meup01-proposal.json", dialect: DialectMEUP01, kind: KindProposal, origKind: "mcp.proposal", typ: TypeProposal,
			key: "prop-123", to: []string{"filesystem-agent"},
			method: "tools/call", params: `{"name":"write_file","arguments":{"path":"notes.txt","content":"hi"}}`},
		{file: "meup01-withdraw.json", dialect: DialectMEUP01, kind: KindWithdraw, origKind: "mcp.withdraw", typ: TypeWithdraw,
			key: "prop-123", targets: []string{"prop-123"}, corr: []string{"prop-123"}, reason: "No longer needed"},
		{file: "meup01-reject.json", dialect: DialectMEUP01, kind: KindReject, origKind: "mcp.reject", typ: TypeReject,
			key: "prop-123", targets: []string{"prop-123"}, corr: []string{"prop-123"}, to: []string{"untrusted-agent"}, reason: "busy"},
		{file: "meup01-chat.json", dialect: DialectMEUP01, kind: KindChat, origKind: "chat", typ: TypeNote,
			key: "reject-789", targets: []string{"reject-789"}, corr: []string{"reject-789"}, to: []string{"untrusted-agent"},
			text: "I'm currently processing a large batch operation that requires exclusive file access. Please retry in about 5 minutes."},
		{file: "mcpx-proposal.json", dialect: DialectMCPX01, kind: KindProposal, origKind: "mcp/proposal:tools/call", typ: TypeProposal,
			key: "prop-123", method: "tools/call", params: `{"name":"write_file","arguments":{"path":"notes.txt"}}`},
		{file: "mcpx-fulfil.json", dialect: DialectMCPX01, kind: KindRequest, origKind: "mcp/request:tools/call", typ: TypeFulfil,
			key: "prop-123", targets: []string{"prop-123"}, corr: []string{"prop-123"}, to: []string{"target-agent"},
			method: "tools/call", params: `{"name":"write_file","arguments":{"path":"notes.txt"}}`},
		{file: "mcpx-withdraw.json", dialect: DialectMCPX01, kind: KindWithdraw, origKind: "proposal/withdraw", typ: TypeWithdraw,
			key: "prop-123", targets: []string{"prop-123"}, corr: []string{"prop-123"}, reason: "Operation no longer needed"},
		{file: "mcpx-reject.json", dialect: DialectMCPX01, kind: KindReject, origKind: "proposal-reject", typ: TypeReject,
			key: "abc123", targets: []string{"abc123"}, corr: []string{"abc123"}, reason: "busy"},
		{file: "mcpx-proposal-ctx.json", dialect: DialectMCPX01, kind: KindProposal, origKind: "mcp/proposal:tools/call:ctx-42", typ: TypeProposal,
			key: "prop-ctx-1", context: "ctx-42", method: "tools/call", params: `{"name":"read_file","arguments":{"path":"a.txt"}}`, ttl: 30000},
		{file: "kernel-proposal.json", dialect: DialectMEW04, kind: KindKernelProposal, origKind: "kernel/proposal", typ: TypeProposal,
			key: "550e8400-e29b-41d4-a716-446655440000", method: "kernel/write",
			params: `{"updates":{"email":"new@example.com","notes":"Updated via automation"}}`},
		{file: "kernel-approve.json", dialect: DialectMEW04, kind: KindKernelApprove, origKind: "kernel/approve", typ: TypeApprove,
			key: "550e8400-e29b-41d4-a716-446655440000", targets: []string{"550e8400-e29b-41d4-a716-446655440000"},
			corr: []string{"550e8400-e29b-41d4-a716-446655440000"}, reason: "looks right"},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			raw := seed(t, tc.file)
			d := decodeOK(t, string(raw))
			if d.Dialect != tc.dialect || d.Env.Protocol != DialectMEW04 {
				t.Errorf("dialect %q protocol %q, want %q and %q", d.Dialect, d.Env.Protocol, tc.dialect, DialectMEW04)
			}
			if d.Env.Kind != tc.kind || d.OrigKind != tc.origKind {
				t.Errorf("kind %q orig %q, want %q %q", d.Env.Kind, d.OrigKind, tc.kind, tc.origKind)
			}
			if d.Type != tc.typ || d.Key != tc.key {
				t.Errorf("type %q key %q, want %q %q", d.Type, d.Key, tc.typ, tc.key)
			}
			if !slices.Equal(d.Targets, tc.targets) {
				t.Errorf("targets %q, want %q", d.Targets, tc.targets)
			}
			if !slices.Equal(d.Env.CorrelationID, tc.corr) {
				t.Errorf("correlation_id %q, want %q", d.Env.CorrelationID, tc.corr)
			}
			if !slices.Equal(d.Env.To, tc.to) {
				t.Errorf("to %q, want %q", d.Env.To, tc.to)
			}
			if d.Env.Context != tc.context {
				t.Errorf("context %q, want %q", d.Env.Context, tc.context)
			}
			if d.Method != tc.method {
				t.Errorf("method %q, want %q", d.Method, tc.method)
			}
			canonEq(t, "params", d.Params, tc.params)
			if d.Reason != tc.reason || d.Text != tc.text || d.Outcome != tc.outcome || d.TTLms != tc.ttl {
				t.Errorf("reason %q text %q outcome %q ttl %d, want %q %q %q %d", d.Reason, d.Text, d.Outcome, d.TTLms, tc.reason, tc.text, tc.outcome, tc.ttl)
			}
			if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(d.Digest) {
				t.Errorf("digest %q is not hex SHA-256", d.Digest)
			}
			if (d.Kernel != nil) != (tc.kind == KindKernelProposal) {
				t.Errorf("Kernel = %v for kind %s", d.Kernel, tc.kind)
			}
			if err := Submittable(d); err != nil {
				t.Errorf("Submittable: %v", err)
			}
			assertRoundTrip(t, d)
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "envelopes", "*.json"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("seed %s has no test case", f)
		}
	}
}

// assertRoundTrip checks that the normalised envelope, marshalled and decoded
// again, is the same event.
func assertRoundTrip(t testing.TB, d *Decoded) {
	t.Helper()
	b, err := json.Marshal(&d.Env)
	if err != nil {
		t.Fatalf("marshal Env: %v", err)
	}
	d2, err := Decode(b, DecodeOptions{Now: testNow})
	if err != nil {
		t.Fatalf("normalised envelope %s does not decode: %v", b, err)
	}
	if d2.Digest != d.Digest || d2.Type != d.Type || d2.Key != d.Key || !slices.Equal(d2.Targets, d.Targets) {
		t.Fatalf("round trip changed the event:\n %s\nfirst  %+v\nsecond %+v", b, d, d2)
	}
	if d2.Method != d.Method || d2.Reason != d.Reason || d2.Text != d.Text || d2.Outcome != d.Outcome || d2.TTLms != d.TTLms ||
		!canon.Equal(orNull(d2.Params), orNull(d.Params)) {
		t.Fatalf("round trip changed derived fields:\nfirst  %+v\nsecond %+v", d, d2)
	}
}

func orNull(b json.RawMessage) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

func TestDecodeRefusals(t *testing.T) {
	const okProp = `"protocol":"mew/v0.4","id":"p1","from":"alice","kind":"mcp/proposal"`
	long := strings.Repeat("x", MaxIDBytes+1)
	max := strings.Repeat("y", MaxIDBytes)
	if _, err := Decode([]byte(`{"protocol":"mew/v0.4","id":"`+max+`","from":"`+max+`","kind":"chat","to":["`+max+`"]}`), DecodeOptions{}); err != nil {
		t.Fatalf("ids of exactly %d bytes refused: %v", MaxIDBytes, err)
	}
	oversize := []byte(`{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"chat","payload":{"text":"` + strings.Repeat("a", MaxEnvelopeBytes) + `"}}`)
	tests := []struct {
		name  string
		raw   string
		code  string
		field string
	}{
		// bytes and JSON
		{"oversize", string(oversize), api.CodeOversize, ""},
		{"invalid utf8 in payload", "{" + okProp + ",\"payload\":{\"method\":\"m\",\"params\":\"\xc3\x28\"}}", api.CodeInvalidUTF8, ""},
		{"invalid utf8 outside strings", "{" + okProp + "}\xff", api.CodeInvalidUTF8, ""},
		{"lone surrogate escape", `{` + okProp + `,"payload":{"method":"m","params":"\udead"}}`, api.CodeInvalidUTF8, "payload.params"},
		{"empty", ``, api.CodeNotJSON, ""},
		{"not json", `hello`, api.CodeNotJSON, ""},
		{"array", `[{"protocol":"mew/v0.4"}]`, api.CodeNotJSON, ""},
		{"string", `"mew/v0.4"`, api.CodeNotJSON, ""},
		{"null", `null`, api.CodeNotJSON, ""},
		{"trailing garbage", `{` + okProp + `,"payload":{"method":"m"}} {}`, api.CodeNotJSON, ""},
		{"truncated", `{` + okProp + `,"payload":{"method":"m"}`, api.CodeNotJSON, ""},
		{"too deep", `{` + okProp + `,"payload":{"method":"m","params":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, api.CodeNotJSON, "payload.params" + strings.Repeat("[0]", 126)},
		{"duplicate top-level key", `{` + okProp + `,"id":"p2","payload":{"method":"m"}}`, api.CodeNotJSON, "id"},
		{"duplicate via escape", `{` + okProp + `,"\u0066rom":"mallory","payload":{"method":"m"}}`, api.CodeNotJSON, "from"},
		{"duplicate in payload", `{` + okProp + `,"payload":{"method":"m","method":"n"}}`, api.CodeNotJSON, "payload.method"},
		// protocol
		{"missing protocol", `{"id":"p1","from":"a","kind":"chat"}`, api.CodeMissingField, "protocol"},
		{"null protocol", `{"protocol":null,"id":"p1","from":"a","kind":"chat"}`, api.CodeMissingField, "protocol"},
		{"protocol wrong type", `{"protocol":4,"id":"p1","from":"a","kind":"chat"}`, api.CodeWrongType, "protocol"},
		{"unknown protocol", `{"protocol":"mew/v9","id":"p1","from":"a","kind":"chat"}`, api.CodeUnknownProtocol, "protocol"},
		{"protocol case matters", `{"protocol":"MEW/v0.4","id":"p1","from":"a","kind":"chat"}`, api.CodeUnknownProtocol, "protocol"},
		// id, from, kind
		{"missing id", `{"protocol":"mew/v0.4","from":"a","kind":"chat"}`, api.CodeMissingField, "id"},
		{"empty id", `{"protocol":"mew/v0.4","id":"","from":"a","kind":"chat"}`, api.CodeMissingField, "id"},
		{"id number", `{"protocol":"mew/v0.4","id":7,"from":"a","kind":"chat"}`, api.CodeWrongType, "id"},
		{"id too long", `{"protocol":"mew/v0.4","id":"` + long + `","from":"a","kind":"chat"}`, api.CodeTooLong, "id"},
		{"id with NUL", `{"protocol":"mew/v0.4","id":"p\u0000","from":"a","kind":"chat"}`, api.CodeBadValue, "id"},
		{"id with newline", `{"protocol":"mew/v0.4","id":"p\n1","from":"a","kind":"chat"}`, api.CodeBadValue, "id"},
		{"missing from", `{"protocol":"mew/v0.4","id":"p1","kind":"chat"}`, api.CodeMissingField, "from"},
		{"from object", `{"protocol":"mew/v0.4","id":"p1","from":{},"kind":"chat"}`, api.CodeWrongType, "from"},
		{"from too long", `{"protocol":"mew/v0.4","id":"p1","from":"` + long + `","kind":"chat"}`, api.CodeTooLong, "from"},
		{"from with DEL", `{"protocol":"mew/v0.4","id":"p1","from":"a\u007f","kind":"chat"}`, api.CodeBadValue, "from"},
		{"missing kind", `{"protocol":"mew/v0.4","id":"p1","from":"a"}`, api.CodeMissingField, "kind"},
		{"kind array", `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":["chat"]}`, api.CodeWrongType, "kind"},
		// to
		{"to string", `{` + okProp + `,"to":"bob","payload":{"method":"m"}}`, api.CodeWrongType, "to"},
		{"to number entry", `{` + okProp + `,"to":["bob",3],"payload":{"method":"m"}}`, api.CodeWrongType, "to[1]"},
		{"to empty entry", `{` + okProp + `,"to":["bob",""],"payload":{"method":"m"}}`, api.CodeBadValue, "to[1]"},
		{"to entry too long", `{` + okProp + `,"to":["a","b","c","` + long + `"],"payload":{"method":"m"}}`, api.CodeTooLong, "to[3]"},
		// ts, context
		{"ts not rfc3339", `{` + okProp + `,"ts":"yesterday","payload":{"method":"m"}}`, api.CodeBadValue, "ts"},
		{"ts without zone", `{` + okProp + `,"ts":"2026-01-02T03:04:05","payload":{"method":"m"}}`, api.CodeBadValue, "ts"},
		{"ts number", `{` + okProp + `,"ts":1700000000,"payload":{"method":"m"}}`, api.CodeWrongType, "ts"},
		{"context number", `{` + okProp + `,"context":1,"payload":{"method":"m"}}`, api.CodeWrongType, "context"},
		// correlation
		{"correlation number", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":5}`, api.CodeWrongType, "correlation_id"},
		{"correlation entry object", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":["p1",{}]}`, api.CodeWrongType, "correlation_id[1]"},
		{"correlation empty string", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":""}`, api.CodeBadValue, "correlation_id"},
		{"correlation entry too long", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":["p1","` + long + `"]}`, api.CodeTooLong, "correlation_id[1]"},
		{"correlation entry control", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":["p\u0000"]}`, api.CodeBadValue, "correlation_id[0]"},
		{"correlationId entry too long meup01", `{"protocol":"meup/v0.1","id":"w1","from":"a","kind":"mcp.withdraw","correlationId":"` + long + `"}`, api.CodeTooLong, "correlationId"},
		// payload
		{"payload array", `{` + okProp + `,"payload":[1]}`, api.CodeWrongType, "payload"},
		{"payload string on chat", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","payload":"hi"}`, api.CodeWrongType, "payload"},
		{"proposal without payload", `{` + okProp + `}`, api.CodeMissingField, "payload"},
		{"proposal null payload", `{` + okProp + `,"payload":null}`, api.CodeMissingField, "payload"},
		{"proposal without method", `{` + okProp + `,"payload":{"params":{}}}`, api.CodeMissingField, "payload.method"},
		{"proposal empty method", `{` + okProp + `,"payload":{"method":""}}`, api.CodeMissingField, "payload.method"},
		{"proposal method number", `{` + okProp + `,"payload":{"method":1}}`, api.CodeWrongType, "payload.method"},
		{"ttl zero", `{` + okProp + `,"payload":{"method":"m","ttl_ms":0}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"ttl negative", `{` + okProp + `,"payload":{"method":"m","ttl_ms":-5}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"ttl fraction", `{` + okProp + `,"payload":{"method":"m","ttl_ms":1.5}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"ttl exponent", `{` + okProp + `,"payload":{"method":"m","ttl_ms":3e4}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"ttl string", `{` + okProp + `,"payload":{"method":"m","ttl_ms":"30000"}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"ttl over a year", `{` + okProp + `,"payload":{"method":"m","ttl_ms":31536000001}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"ttl overflow", `{` + okProp + `,"payload":{"method":"m","ttl_ms":99999999999999999999999}}`, api.CodeBadValue, "payload.ttl_ms"},
		{"reason number", `{"protocol":"mew/v0.4","id":"r1","from":"a","kind":"mcp/reject","correlation_id":["p1"],"payload":{"reason":4}}`, api.CodeWrongType, "payload.reason"},
		{"approve reason object", `{"protocol":"mew/v0.4","id":"a1","from":"a","kind":"kernel/approve","correlation_id":["p1"],"payload":{"reason":{}}}`, api.CodeWrongType, "payload.reason"},
		{"chat text number", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":["p1"],"payload":{"text":1}}`, api.CodeWrongType, "payload.text"},
		{"chat message bool", `{"protocol":"meup/v0.1","id":"c1","from":"a","kind":"chat","correlationId":"p1","payload":{"message":true}}`, api.CodeWrongType, "payload.message"},
		{"fulfil method number", `{"protocol":"mew/v0.4","id":"f1","from":"a","kind":"mcp/request","correlation_id":["p1"],"payload":{"method":[]}}`, api.CodeWrongType, "payload.method"},
		{"expire bad deadline", `{"protocol":"mew/v0.4","id":"expire:default/p1","from":"ledger","kind":"ledger/expire","correlation_id":["p1"],"payload":{"deadline":"soon"}}`, api.CodeBadValue, "payload.deadline"},
		// correlation required
		{"withdraw without correlation", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","payload":{"reason":"busy"}}`, api.CodeMissingCorrelation, "correlation_id"},
		{"withdraw with empty correlation", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":[]}`, api.CodeMissingCorrelation, "correlation_id"},
		{"reject without correlation", `{"protocol":"mew/v0.3","id":"r1","from":"a","kind":"mcp/reject"}`, api.CodeMissingCorrelation, "correlation_id"},
		{"meup01 reject without correlation", `{"protocol":"meup/v0.1","id":"r1","from":"a","kind":"mcp.reject","payload":{"reason":"busy"}}`, api.CodeMissingCorrelation, "correlationId"},
		{"mcpx withdraw without any id", `{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"proposal/withdraw","payload":{"reason":"x"}}`, api.CodeMissingCorrelation, "correlation_id"},
		{"mcpx withdraw with wrong spelling of id", `{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"proposal/withdraw","payload":{"proposal_id":"p1"}}`, api.CodeMissingCorrelation, "correlation_id"},
		{"mcpx reject proposal_id number", `{"protocol":"mcpx/v0.1","id":"r1","from":"a","kind":"proposal-reject","payload":{"proposal_id":12}}`, api.CodeWrongType, "payload.proposal_id"},
		{"mcpx reject payload id differs", `{"protocol":"mcpx/v0.1","id":"r1","from":"a","kind":"proposal-reject","correlation_id":"p1","payload":{"proposal_id":"p2"}}`, api.CodeBadValue, "payload.proposal_id"},
		{"mcpx withdraw payload id too long", `{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"proposal/withdraw","payload":{"proposalId":"` + long + `"}}`, api.CodeTooLong, "payload.proposalId"},
		{"response without correlation", `{"protocol":"mew/v0.4","id":"s1","from":"a","kind":"mcp/response","payload":{"result":{}}}`, api.CodeMissingCorrelation, "correlation_id"},
		{"approve without correlation", `{"protocol":"mew/v0.4","id":"a1","from":"a","kind":"kernel/approve"}`, api.CodeMissingCorrelation, "correlation_id"},
		{"expire without correlation", `{"protocol":"mew/v0.4","id":"expire:default/p1","from":"ledger","kind":"ledger/expire"}`, api.CodeMissingCorrelation, "correlation_id"},
		// dialects
		{"dot kind under mew04", `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp.proposal","payload":{"method":"m"}}`, api.CodeDialectMismatch, "kind"},
		{"dot kind under meup02", `{"protocol":"meup/v0.2","id":"w1","from":"a","kind":"mcp.withdraw","correlation_id":["p1"]}`, api.CodeDialectMismatch, "kind"},
		{"mcpx kind under mew04", `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal:tools/call","payload":{"method":"tools/call"}}`, api.CodeDialectMismatch, "kind"},
		{"mcpx withdraw under mew03", `{"protocol":"mew/v0.3","id":"w1","from":"a","kind":"proposal/withdraw","correlation_id":["p1"]}`, api.CodeDialectMismatch, "kind"},
		{"mcpx reject under mew04", `{"protocol":"mew/v0.4","id":"r1","from":"a","kind":"proposal-reject","correlation_id":["p1"]}`, api.CodeDialectMismatch, "kind"},
		{"slash kind under meup01", `{"protocol":"meup/v0.1","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, api.CodeDialectMismatch, "kind"},
		{"mcpx kind under meup01", `{"protocol":"meup/v0.1","id":"p1","from":"a","kind":"mcp/request:tools/call","correlationId":"p0"}`, api.CodeDialectMismatch, "kind"},
		{"dot kind under mcpx", `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp.proposal","payload":{"method":"m"}}`, api.CodeDialectMismatch, "kind"},
		{"mew withdraw under mcpx", `{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":"p1"}`, api.CodeDialectMismatch, "kind"},
		{"correlationId under mew04", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlationId":"p1"}`, api.CodeDialectMismatch, "correlationId"},
		{"correlationId under mcpx", `{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"proposal/withdraw","correlationId":"p1"}`, api.CodeDialectMismatch, "correlationId"},
		{"correlation_id under meup01", `{"protocol":"meup/v0.1","id":"w1","from":"a","kind":"mcp.withdraw","correlation_id":["p1"]}`, api.CodeDialectMismatch, "correlation_id"},
		{"both spellings mew04", `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":["p1"],"correlationId":"p1"}`, api.CodeDialectMismatch, "correlationId"},
		{"both spellings meup01", `{"protocol":"meup/v0.1","id":"w1","from":"a","kind":"mcp.withdraw","correlation_id":["p1"],"correlationId":"p1"}`, api.CodeDialectMismatch, "correlation_id"},
		{"mcpx method mismatch", `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal:tools/call","payload":{"method":"resources/read"}}`, api.CodeBadValue, "payload.method"},
		{"mcpx fulfil method mismatch", `{"protocol":"mcpx/v0.1","id":"f1","from":"a","kind":"mcp/request:tools/call","correlation_id":"p1","payload":{"method":"tools/list"}}`, api.CodeBadValue, "payload.method"},
		{"mcpx empty method suffix", `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal:","payload":{"method":"m"}}`, api.CodeBadValue, "kind"},
		{"mcpx empty ctx suffix", `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal:m:","payload":{"method":"m"}}`, api.CodeBadValue, "kind"},
		{"mcpx bare proposal without method", `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal","payload":{}}`, api.CodeMissingField, "payload.method"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := decodeRefused(t, []byte(tc.raw))
			if r.Code != tc.code || r.Field != tc.field {
				t.Fatalf("refusal %q field %q (%s), want %q field %q", r.Code, r.Field, r.Message, tc.code, tc.field)
			}
		})
	}
}

func TestDecodeKernel(t *testing.T) {
	base := string(seed(t, "kernel-proposal.json"))
	d := decodeOK(t, base)
	k := d.Kernel
	if k.ProposalID != d.Env.ID || k.ActionType != api.ActionWrite || k.TimeWindow == nil || k.TimeWindow.ValidUntilMs != 1705171500000 ||
		k.Target == nil || k.Target.Domain != "salesforce.com" || k.ApprovalClass != api.ApprovalNone || len(k.Preconditions) != 1 {
		t.Fatalf("kernel proposal decoded wrong: %+v", k)
	}
	if d.TTLms != 0 {
		t.Fatalf("kernel TTLms = %d, want 0 (the fold reads time_window)", d.TTLms)
	}
	tests := []struct {
		name, raw, code, field string
	}{
		{"id differs from proposal_id", strings.Replace(base, `"id":"550e8400-e29b-41d4-a716-446655440000"`, `"id":"other"`, 1), RuleProposalID, "payload.proposal_id"},
		{"empty proposal_id", strings.Replace(base, `"proposal_id": "550e8400-e29b-41d4-a716-446655440000"`, `"proposal_id": ""`, 1), "V-PROP-001", "payload.proposal_id"},
		{"missing proposal_id", strings.Replace(base, `"proposal_id": "550e8400-e29b-41d4-a716-446655440000",`, ``, 1), "V-PROP-001", "payload.proposal_id"},
		{"unknown field", strings.Replace(base, `"approval_class": "none"`, `"approval_class": "none", "zeta": 1, "extra": 2`, 1), api.CodeUnknownField, "payload.extra"},
		{"wrong type top", strings.Replace(base, `"ts_ms": 1705171200000`, `"ts_ms": "yesterday"`, 1), RuleTSms, "payload.ts_ms"},
		{"wrong type nested", strings.Replace(base, `"domain": "salesforce.com"`, `"domain": 5`, 1), RuleTarget, "payload.target.domain"},
		{"no payload", `{"protocol":"mew/v0.4","id":"k1","from":"a","kind":"kernel/proposal"}`, api.CodeMissingField, "payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.raw == base {
				t.Fatal("replacement did not apply")
			}
			r := decodeRefused(t, []byte(tc.raw))
			if r.Code != tc.code || r.Field != tc.field {
				t.Fatalf("refusal %q field %q (%s), want %q field %q", r.Code, r.Field, r.Message, tc.code, tc.field)
			}
		})
	}
}

func TestClassification(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		typ     Type
		key     string
		targets []string
	}{
		{"proposal keeps correlation but keys on itself", `{"protocol":"mew/v0.4","id":"p2","from":"a","kind":"mcp/proposal","correlation_id":["p1"],"payload":{"method":"m"}}`, TypeProposal, "p2", nil},
		{"request without correlation", `{"protocol":"mew/v0.4","id":"q1","from":"a","kind":"mcp/request","payload":{"method":"tools/list"}}`, TypeIgnored, "q1", nil},
		{"request with several correlation ids", `{"protocol":"mew/v0.4","id":"f1","from":"a","kind":"mcp/request","correlation_id":["p1","p2"],"payload":{"method":"m"}}`, TypeFulfil, "p1", []string{"p1"}},
		{"fulfil without payload", `{"protocol":"mew/v0.4","id":"f1","from":"a","kind":"mcp/request","correlation_id":"p1"}`, TypeFulfil, "p1", []string{"p1"}},
		{"chat without correlation", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","payload":{"text":"hi"}}`, TypeIgnored, "c1", nil},
		{"chat with several", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":["r1","p1"],"payload":{"text":"hi"}}`, TypeNote, "r1", []string{"r1"}},
		{"response first of several", `{"protocol":"mew/v0.4","id":"s1","from":"a","kind":"mcp/response","correlation_id":["f1","f2"]}`, TypeResponse, "f1", []string{"f1"}},
		{"reject several deduplicated", `{"protocol":"mew/v0.4","id":"r1","from":"a","kind":"mcp/reject","correlation_id":["p2","p1","p2"]}`, TypeReject, "p2", []string{"p2", "p1"}},
		{"approve several", `{"protocol":"mew/v0.4","id":"a1","from":"a","kind":"kernel/approve","correlation_id":["p1","p2"]}`, TypeApprove, "p1", []string{"p1", "p2"}},
		{"expire first only", `{"protocol":"mew/v0.4","id":"expire:default/p1","from":"ledger","kind":"ledger/expire","correlation_id":["p1","p2"]}`, TypeExpire, "p1", []string{"p1"}},
		{"unknown kind with correlation", `{"protocol":"mew/v0.4","id":"n1","from":"a","kind":"mcp/notification","correlation_id":["p1"]}`, TypeIgnored, "p1", nil},
		{"unknown kind", `{"protocol":"mew/v0.4","id":"n1","from":"a","kind":"system/welcome","payload":{}}`, TypeIgnored, "n1", nil},
		// contract §2, every lifecycle form: ADR-v2c option 5's withdraw.
		{"meup01 lifecycle withdraw", `{"protocol":"meup/v0.1","id":"l1","from":"a","kind":"meup.lifecycle","correlationId":"p1","payload":{"operation":"withdraw"}}`, TypeWithdraw, "p1", []string{"p1"}},
		{"kernel kinds in meup01", `{"protocol":"meup/v0.1","id":"a1","from":"a","kind":"kernel/approve","correlationId":["p1","p2"]}`, TypeApprove, "p1", []string{"p1", "p2"}},
		{"kernel kinds in mcpx", `{"protocol":"mcpx/v0.1","id":"a1","from":"a","kind":"kernel/approve","correlation_id":"p1"}`, TypeApprove, "p1", []string{"p1"}},
		{"mcpx request without correlation", `{"protocol":"mcpx/v0.1","id":"q1","from":"a","kind":"mcp/request:tools/list"}`, TypeIgnored, "q1", nil},
		{"mcpx withdraw correlation wins", `{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"proposal/withdraw","correlation_id":["p1","p2"],"payload":{"proposalId":"p2"}}`, TypeWithdraw, "p1", []string{"p1", "p2"}},
		{"mcpx response with suffix", `{"protocol":"mcpx/v0.1","id":"s1","from":"a","kind":"mcp/response:tools/call:ctx","correlation_id":"f1","payload":{"error":{"code":-1}}}`, TypeResponse, "f1", []string{"f1"}},
		{"mcpx chat", `{"protocol":"mcpx/v0.1","id":"c1","from":"a","kind":"chat","correlation_id":"r1","payload":{"text":"why"}}`, TypeNote, "r1", []string{"r1"}},
		{"mcpx proposal bare kind", `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, TypeProposal, "p1", nil},
		{"unicode ids", `{"protocol":"mew/v0.4","id":"wø.1","from":"ägent *>","kind":"mcp/withdraw","correlation_id":"prøp.1 >"}`, TypeWithdraw, "prøp.1 >", []string{"prøp.1 >"}},
		{"NUL allowed in payload", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":"p1","payload":{"text":"a\u0000b"}}`, TypeNote, "p1", []string{"p1"}},
		{"null optional fields", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","to":null,"ts":null,"context":null,"correlation_id":null,"payload":null}`, TypeIgnored, "c1", nil},
		{"unknown top-level members ignored", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":"p1","x-trace":{"span":1}}`, TypeNote, "p1", []string{"p1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decodeOK(t, tc.raw)
			if d.Type != tc.typ || d.Key != tc.key || !slices.Equal(d.Targets, tc.targets) {
				t.Fatalf("type %q key %q targets %q, want %q %q %q", d.Type, d.Key, d.Targets, tc.typ, tc.key, tc.targets)
			}
			assertRoundTrip(t, d)
		})
	}
}

func TestPayloadFields(t *testing.T) {
	d := decodeOK(t, `{"protocol":"mew/v0.4","id":"s1","from":"a","kind":"mcp/response","correlation_id":"f1","payload":{"error":{"code":-32000}}}`)
	if d.Outcome != "failed" {
		t.Errorf("outcome %q, want failed", d.Outcome)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"s1","from":"a","kind":"mcp/response","correlation_id":"f1","payload":{"result":null,"error":null}}`)
	if d.Outcome != "succeeded" {
		t.Errorf("outcome %q, want succeeded (result present, error null)", d.Outcome)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"s1","from":"a","kind":"mcp/response","correlation_id":"f1","payload":{}}`)
	if d.Outcome != "" {
		t.Errorf("outcome %q, want empty", d.Outcome)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":"r1","payload":{"text":"T","message":"M"}}`)
	if d.Text != "T" {
		t.Errorf("text %q, want payload.text first", d.Text)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"r1","from":"a","kind":"mcp/reject","correlation_id":"p1","payload":{"reason":"made_up_code"}}`)
	if d.Reason != "made_up_code" {
		t.Errorf("unknown reason not kept as given: %q", d.Reason)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"m","params":null,"ttl_ms":31536000000}}`)
	if d.Params != nil || d.TTLms != MaxTTLms {
		t.Errorf("params %s ttl %d, want nil and %d", d.Params, d.TTLms, MaxTTLms)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"m","params":[1, 2.50, "x"]}}`)
	if string(d.Params) != `[1, 2.50, "x"]` {
		t.Errorf("params %s, want the raw value as sent", d.Params)
	}
	// mcpx: the method only in the kind is lifted into the payload.
	d = decodeOK(t, `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal:tools/call","payload":{"params":{"b":1,"a":2},"method":null}}`)
	if d.Method != "tools/call" || string(d.Env.Payload) != `{"method":"tools/call","params":{"a":2,"b":1}}` {
		t.Errorf("mcpx method lift: method %q payload %s", d.Method, d.Env.Payload)
	}
	d = decodeOK(t, `{"protocol":"mcpx/v0.1","id":"f1","from":"a","kind":"mcp/request:tools/call","correlation_id":"p1"}`)
	if d.Method != "tools/call" || string(d.Env.Payload) != `{"method":"tools/call"}` {
		t.Errorf("mcpx fulfil without payload: method %q payload %s", d.Method, d.Env.Payload)
	}
	// explicit context wins over the mcpx CTX suffix
	d = decodeOK(t, `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal:m:sfx","context":"explicit","payload":{"method":"m"}}`)
	if d.Env.Context != "explicit" {
		t.Errorf("context %q, want explicit", d.Env.Context)
	}
	// the CTX part may itself contain colons
	d = decodeOK(t, `{"protocol":"mcpx/v0.1","id":"p1","from":"a","kind":"mcp/proposal:m:a:b","payload":{"method":"m"}}`)
	if d.Env.Context != "a:b" || d.Method != "m" {
		t.Errorf("context %q method %q, want a:b and m", d.Env.Context, d.Method)
	}
	// to keeps duplicates and order; [] is broadcast like absent
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","to":["b","a","b"],"payload":{"method":"m"}}`)
	if !slices.Equal(d.Env.To, []string{"b", "a", "b"}) {
		t.Errorf("to %q", d.Env.To)
	}
	d = decodeOK(t, `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","to":[],"payload":{"method":"m"}}`)
	if d.Env.To != nil {
		t.Errorf("to %q, want nil for []", d.Env.To)
	}
}

func TestDecodeDoesNotAliasInput(t *testing.T) {
	raw := seed(t, "spec-mew04-proposal.json")
	d := decodeOK(t, string(raw))
	payload := string(d.Env.Payload)
	params := string(d.Params)
	for i := range raw {
		raw[i] = 'x'
	}
	if string(d.Env.Payload) != payload || string(d.Params) != params {
		t.Fatal("Decoded aliases the input buffer")
	}
}

func TestDigest(t *testing.T) {
	dig := func(raw string) string { return decodeOK(t, raw).Digest }
	// The same proposal in every dialect (and with/without ts).
	same := []string{
		`{"protocol":"mew/v0.4","id":"p1","ts":"2026-01-02T03:04:05Z","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p1","ts":"2027-05-06T07:08:09.123+02:00","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.3","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"params":{"x":1},"method":"tools/call"}}`,
		`{"kind":"mcp/proposal","from":"a","id":"p1","protocol":"meup/v0.2","to":["b"],"payload":{ "method" : "tools/call" , "params" : { "x" : 1 } }}`,
		`{"protocol":"meup/v0.1","id":"p1","from":"a","to":["b"],"kind":"mcp.proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mcpx/v0.1","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal:tools/call","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mcpx/v0.1","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal:tools/call","payload":{"params":{"x":1}}}`,
		`{"protocol":"mcpx/v0.1","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}},"x-extra":true}`,
	}
	want := dig(same[0])
	for _, raw := range same[1:] {
		if got := dig(raw); got != want {
			t.Errorf("digest differs for %s", raw)
		}
	}
	// Withdrawals: single string vs array vs duplicates; mcpx via payload id.
	wsame := []string{
		`{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":["p1"],"payload":{"reason":"busy"}}`,
		`{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":"p1","payload":{"reason":"busy"}}`,
		`{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","correlation_id":["p1","p1"],"payload":{"reason":"busy"}}`,
		`{"protocol":"meup/v0.1","id":"w1","from":"a","kind":"mcp.withdraw","correlationId":"p1","payload":{"reason":"busy"}}`,
		`{"protocol":"meup/v0.1","id":"w1","from":"a","kind":"mcp.withdraw","correlationId":["p1"],"payload":{"reason":"busy"}}`,
		`{"protocol":"mcpx/v0.1","id":"w1","from":"a","kind":"proposal/withdraw","correlation_id":"p1","payload":{"reason":"busy"}}`,
	}
	wwant := dig(wsame[0])
	for _, raw := range wsame[1:] {
		if got := dig(raw); got != wwant {
			t.Errorf("digest differs for %s", raw)
		}
	}
	// Anything that changes the event changes the digest.
	differ := []string{
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":2}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1.0}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1},"ttl_ms":5}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["c"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"z","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p2","from":"a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","context":"c","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal","correlation_id":"q","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mcpx/v0.1","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal:tools/call:ctx","payload":{"method":"tools/call","params":{"x":1}}}`,
	}
	seen := map[string]string{want: same[0]}
	for _, raw := range differ {
		got := dig(raw)
		if prev, dup := seen[got]; dup {
			t.Errorf("same digest for\n %s\n %s", prev, raw)
		}
		seen[got] = raw
	}
}

// TestDigestGolden pins the digest definition: SHA-256 of the canonical JSON
// of the normalised envelope marshalled with ts and protocol cleared. It
// must never change: stored Nats-Msg-Ids and the fold's duplicate detection
// depend on it.
func TestDigestGolden(t *testing.T) {
	tests := []struct{ raw, canonical string }{
		{`{"protocol":"meup/v0.1","id":"w1","ts":"2026-01-02T03:04:05Z","from":"a","kind":"mcp.withdraw","correlationId":"p1","payload":{ "reason" : "busy" }}`,
			`{"correlation_id":["p1"],"from":"a","id":"w1","kind":"mcp/withdraw","payload":{"reason":"busy"},"protocol":""}`},
		{`{"protocol":"mcpx/v0.1","id":"p1","from":"a","to":["b"],"kind":"mcp/proposal:tools/call:c1","payload":{"params":{"z":"<\u00e9>","a":1.0}}}`,
			`{"context":"c1","from":"a","id":"p1","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"a":1.0,"z":"<é>"}},"protocol":"","to":["b"]}`},
	}
	for _, tc := range tests {
		sum := sha256.Sum256([]byte(tc.canonical))
		if got, want := decodeOK(t, tc.raw).Digest, hex.EncodeToString(sum[:]); got != want {
			t.Errorf("digest of %s = %s, want sha256(%s) = %s", tc.raw, got, tc.canonical, want)
		}
	}
}

func TestMsgID(t *testing.T) {
	d := decodeOK(t, string(seed(t, "spec-mew04-proposal.json")))
	id := d.MsgID("default")
	if !regexp.MustCompile(`^default/env-req-1/[0-9a-f]{64}$`).MatchString(id) || !strings.HasSuffix(id, d.Digest) {
		t.Fatalf("MsgID = %q", id)
	}
	if d.MsgID("other") == id {
		t.Fatal("MsgID does not depend on the space")
	}
}

func TestExpireEnvelope(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	raw := ExpireEnvelope("default", "env-req-1", deadline)
	want := `{"protocol":"mew/v0.4","id":"expire:default/env-req-1","from":"ledger","kind":"ledger/expire","correlation_id":["env-req-1"],"payload":{"deadline":"2026-01-02T02:04:05.0000006Z"}}`
	if string(raw) != want {
		t.Fatalf("ExpireEnvelope =\n %s\nwant\n %s", raw, want)
	}
	if ExpireID("default", "env-req-1") != "expire:default/env-req-1" {
		t.Fatalf("ExpireID = %q", ExpireID("default", "env-req-1"))
	}
	d := decodeOK(t, string(raw))
	if d.Type != TypeExpire || d.Key != "env-req-1" || !slices.Equal(d.Targets, []string{"env-req-1"}) || d.Env.From != LedgerSender || d.Env.ID != "expire:default/env-req-1" {
		t.Fatalf("decoded expire: %+v", d)
	}
	if r, _ := AsRefusal(Submittable(d)); r == nil || r.Code != api.CodeReservedKind || r.Field != "kind" {
		t.Fatalf("Submittable(expire) = %v, want reserved_kind", r)
	}
	// Deterministic, and decodable for the longest ids and awkward strings.
	if string(ExpireEnvelope("default", "env-req-1", deadline)) != string(raw) {
		t.Fatal("ExpireEnvelope not deterministic")
	}
	long := strings.Repeat("é", MaxIDBytes/2)
	for _, pid := range []string{long, `q"u\o<t>e&`, "a.b *>", "ünï"} {
		d := decodeOK(t, string(ExpireEnvelope(long, pid, deadline)))
		if d.Type != TypeExpire || !slices.Equal(d.Targets, []string{pid}) || d.Env.ID != ExpireID(long, pid) {
			t.Fatalf("expire of %q: %+v", pid, d)
		}
	}
}

func TestSubmittable(t *testing.T) {
	tests := []struct {
		name, raw, code, field string
	}{
		{"proposal", `{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, "", ""},
		{"fulfil", `{"protocol":"mew/v0.4","id":"f1","from":"a","kind":"mcp/request","correlation_id":"p1"}`, "", ""},
		{"note", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":"p1"}`, "", ""},
		{"approve", `{"protocol":"mew/v0.4","id":"a1","from":"a","kind":"kernel/approve","correlation_id":"p1"}`, "", ""},
		{"request without correlation", `{"protocol":"mew/v0.4","id":"q1","from":"a","kind":"mcp/request","payload":{"method":"m"}}`, api.CodeMissingCorrelation, "correlation_id"},
		{"mcpx request without correlation", `{"protocol":"mcpx/v0.1","id":"q1","from":"a","kind":"mcp/request:tools/call"}`, api.CodeMissingCorrelation, "correlation_id"},
		{"meup01 chat without correlation", `{"protocol":"meup/v0.1","id":"c1","from":"a","kind":"chat","payload":{"message":"hi"}}`, api.CodeMissingCorrelation, "correlationId"},
		{"chat without correlation", `{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","payload":{"text":"hi"}}`, api.CodeMissingCorrelation, "correlation_id"},
		{"other kind", `{"protocol":"mew/v0.4","id":"n1","from":"a","kind":"system/presence"}`, api.CodeNotLifecycle, "kind"},
		{"other kind with correlation", `{"protocol":"mew/v0.4","id":"n1","from":"a","kind":"mcp/notification","correlation_id":"p1"}`, api.CodeNotLifecycle, "kind"},
		{"expire", `{"protocol":"mew/v0.4","id":"expire:s/p1","from":"ledger","kind":"ledger/expire","correlation_id":"p1"}`, api.CodeReservedKind, "kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Submittable(decodeOK(t, tc.raw))
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Submittable = %v, want nil", err)
				}
				return
			}
			r, ok := err.(*RefusalError)
			if !ok || r.Code != tc.code || r.Field != tc.field {
				t.Fatalf("Submittable = %v, want %s field %s", err, tc.code, tc.field)
			}
		})
	}
}

func TestSubmitLimits(t *testing.T) {
	if got := DefaultSubmitLimits(); got != (SubmitLimits{MaxBytes: 1 << 20, MaxTo: 64, MaxCorrelation: 64}) {
		t.Fatalf("DefaultSubmitLimits = %+v", got)
	}
	mk := func(nTo, nCorr int) ([]byte, *Decoded) {
		to, corr := make([]string, nTo), make([]string, nCorr)
		for i := range to {
			to[i] = "t" + strings.Repeat("x", i)
		}
		for i := range corr {
			corr[i] = "c" + strings.Repeat("x", i)
		}
		tb, _ := json.Marshal(to)
		cb, _ := json.Marshal(corr)
		raw := `{"protocol":"mew/v0.4","id":"w1","from":"a","kind":"mcp/withdraw","to":` + string(tb) + `,"correlation_id":` + string(cb) + `}`
		return []byte(raw), decodeOK(t, raw)
	}
	tests := []struct {
		name        string
		lim         SubmitLimits
		nTo, nCorr  int
		code, field string
	}{
		{"defaults at limit", DefaultSubmitLimits(), 64, 64, "", ""},
		{"zero value means defaults", SubmitLimits{}, 64, 64, "", ""},
		{"too many to", DefaultSubmitLimits(), 65, 1, api.CodeTooMany, "to"},
		{"too many correlation", DefaultSubmitLimits(), 1, 65, api.CodeTooMany, "correlation_id"},
		{"custom to", SubmitLimits{MaxTo: 2}, 3, 1, api.CodeTooMany, "to"},
		{"custom correlation", SubmitLimits{MaxCorrelation: 2}, 0, 3, api.CodeTooMany, "correlation_id"},
		{"custom bytes", SubmitLimits{MaxBytes: 50}, 1, 1, api.CodeOversize, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, d := mk(tc.nTo, tc.nCorr)
			err := tc.lim.Check(raw, d)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Check = %v", err)
				}
				return
			}
			r, ok := err.(*RefusalError)
			if !ok || r.Code != tc.code || r.Field != tc.field {
				t.Fatalf("Check = %v, want %s field %q", err, tc.code, tc.field)
			}
		})
	}
	if err := (SubmitLimits{MaxBytes: 3}).Check([]byte("1234"), nil); err == nil {
		t.Fatal("size not checked without a Decoded")
	}
}

func TestDecodeDeterministic(t *testing.T) {
	// Map iteration must not leak into results: decode many times.
	raw := `{"protocol":"mew/v0.4","id":"k","from":"a","kind":"kernel/proposal","payload":{"proposal_id":"k","b1":1,"a1":2,"c1":3,"z":4,"y":5}}`
	first := decodeRefused(t, []byte(raw))
	for range 50 {
		r := decodeRefused(t, []byte(raw))
		if *r != *first {
			t.Fatalf("refusal differs between runs: %v vs %v", r, first)
		}
	}
	if first.Field != "payload.a1" {
		t.Fatalf("field %q, want the first unknown member in key order", first.Field)
	}
}

func BenchmarkDecode(b *testing.B) {
	raw := seed(b, "spec-mew04-proposal.json")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
