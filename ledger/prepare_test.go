package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
)

func TestPrepareStandalone(t *testing.T) {
	raw := []byte(`{"protocol":"mew/v0.4","id":"env req.1","from":"agent.a","to":["b"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`)
	p, err := PrepareStandalone("", raw, SubmitLimits{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p.Space != DefaultSpace || !strings.HasPrefix(p.Subject, "ledger.default.~") || !strings.HasSuffix(p.Subject, ".proposal.~YWdlbnQuYQ") {
		t.Fatalf("space %q subject %q", p.Space, p.Subject)
	}
	if p.MsgID != p.Decoded.MsgID(DefaultSpace) || string(p.Raw) != string(raw) {
		t.Fatalf("msg id %q", p.MsgID)
	}
	for name, tc := range map[string]struct {
		space  string
		raw    string
		limits SubmitLimits
		code   string
		field  string
	}{
		"too many to":     {"", `{"protocol":"mew/v0.4","id":"x","from":"a","to":["b","c","d"],"kind":"mcp/proposal","payload":{"method":"m"}}`, SubmitLimits{MaxTo: 2}, api.CodeTooMany, "to"},
		"oversize":        {"", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{}}`, SubmitLimits{MaxBytes: 20}, api.CodeOversize, ""},
		"not submittable": {"", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"ledger/expire","correlation_id":["y"],"payload":{}}`, SubmitLimits{}, api.CodeReservedKind, "kind"},
		"bad space":       {strings.Repeat("s", MaxSpaceBytes+1), `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/proposal","payload":{}}`, SubmitLimits{}, api.CodeTooLong, "space"},
	} {
		_, err := PrepareStandalone(tc.space, []byte(tc.raw), tc.limits, time.Now())
		r, ok := AsRefusal(err)
		if !ok || r.Code != tc.code || r.Field != tc.field || !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want %s (field %q)", name, err, tc.code, tc.field)
		}
	}
}

func TestMaybeBareKernel(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"proposal_id":"p","actor":"a"}`: true,
		`{"request_id":"r"}`:              true,
		`{"protocol":"mew/v0.4","id":"p","kind":"kernel/proposal","payload":{"proposal_id":"p"}}`: false,
		`{"protocol":"mew/v0.4","id":"x","from":"a","kind":"chat"}`:                               false,
		`not json proposal_id`: false,
	} {
		if got := MaybeBareKernel([]byte(raw)); got != want {
			t.Errorf("MaybeBareKernel(%s) = %t", raw, got)
		}
	}
}
