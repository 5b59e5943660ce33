package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
)

// TestDecodeGap: the ledger's gap envelope decodes to TypeGap keyed by the
// bridge; only the system append path takes it (reserved_kind on submit),
// and its payload is checked.
func TestDecodeGap(t *testing.T) {
	at := time.Date(2026, 11, 24, 6, 0, 0, 5, time.UTC)
	g := Gap{Bridge: "ledger-recorder", MEWSpace: "demo", Gateway: "ws://127.0.0.1:8080", LastEnvelope: "env-9",
		DisconnectedAt: at, ReconnectedAt: at.Add(3 * time.Second), Reason: "read: EOF"}
	raw, err := GapEnvelope(g)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(raw, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != TypeGap || d.Key != "ledger-recorder" || len(d.Targets) != 0 || d.Gap == nil || *d.Gap != g {
		t.Fatalf("decoded %+v gap %+v", d, d.Gap)
	}
	if _, err := PrepareStandalone("default", raw, SubmitLimits{}, at); err == nil {
		t.Fatal("submit path accepted ledger/gap")
	} else if r, _ := AsRefusal(err); r.Code != api.CodeReservedKind {
		t.Fatalf("submit refusal %v, want %s", err, api.CodeReservedKind)
	}
	p, _, err := PrepareEnvelope("default", raw, SubmitLimits{}, at, false)
	if err != nil {
		t.Fatalf("system append refused the gap: %v", err)
	}
	if p.Subject != "ledger.default.ledger-recorder.gap.ledger" {
		t.Fatalf("subject %s", p.Subject)
	}

	long := strings.Repeat("b", MaxIDBytes)
	if raw, err = GapEnvelope(Gap{Bridge: long, DisconnectedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(raw, DecodeOptions{}); err != nil {
		t.Fatalf("gap of a %d-byte bridge name refused: %v", len(long), err)
	}

	for _, c := range []struct{ payload, code, field string }{
		{`{}`, api.CodeMissingField, "payload.bridge"},
		{`{"bridge":"b"}`, api.CodeMissingField, "payload.disconnected_at"},
		{`{"bridge":7,"disconnected_at":"2026-11-24T06:00:00Z"}`, api.CodeWrongType, "payload.bridge"},
		{`{"bridge":"b","disconnected_at":"yesterday"}`, api.CodeBadValue, "payload.disconnected_at"},
		{`{"bridge":"b","disconnected_at":"2026-11-24T06:00:00Z","reconnected_at":"soon"}`, api.CodeBadValue, "payload.reconnected_at"},
		{`{"bridge":"b","disconnected_at":"2026-11-24T06:00:00Z","reason":1}`, api.CodeWrongType, "payload.reason"},
	} {
		raw := `{"protocol":"mew/v0.4","id":"gap:b/1","from":"ledger","kind":"ledger/gap","payload":` + c.payload + `}`
		_, err := Decode([]byte(raw), DecodeOptions{})
		r, ok := AsRefusal(err)
		if !ok || r.Code != c.code || r.Field != c.field {
			t.Errorf("%s: got %v, want %s at %s", c.payload, err, c.code, c.field)
		}
	}
	if _, err := Decode([]byte(`{"protocol":"mew/v0.4","id":"gap:b/1","from":"ledger","kind":"ledger/gap"}`), DecodeOptions{}); err == nil {
		t.Error("gap without payload accepted")
	}
}

// TestSubmitReserved: every submit path (they share Submittable through
// prepare) refuses the ids and the sender only the ledger uses; the system
// append path takes the ledger's own events.
func TestSubmitReserved(t *testing.T) {
	now := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct{ raw, code, field string }{
		{`{"protocol":"mew/v0.4","id":"expire:default/p1","from":"mallory","kind":"mcp/reject","correlation_id":["p1"]}`, api.CodeReservedID, "id"},
		{`{"protocol":"mew/v0.4","id":"gap:rec/1","from":"mallory","kind":"chat","correlation_id":["p1"],"payload":{"text":"x"}}`, api.CodeReservedID, "id"},
		{`{"protocol":"meup/v0.1","id":"expire:x","from":"a","kind":"mcp.proposal","payload":{"method":"m"}}`, api.CodeReservedID, "id"},
		{`{"protocol":"mew/v0.4","id":"p1","from":"ledger","kind":"mcp/proposal","payload":{"method":"m"}}`, api.CodeReservedSender, "from"},
		{`{"protocol":"mew/v0.4","id":"w1","from":"ledger","kind":"mcp/withdraw","correlation_id":["p1"]}`, api.CodeReservedSender, "from"},
		{string(ExpireEnvelope("default", "p1", now)), api.CodeReservedKind, "kind"},
	} {
		_, err := PrepareStandalone("default", []byte(c.raw), SubmitLimits{}, now)
		r, ok := AsRefusal(err)
		if !ok || r.Code != c.code || r.Field != c.field {
			t.Errorf("%s: got %v, want %s at %s", c.raw, err, c.code, c.field)
		}
	}
	for _, raw := range [][]byte{
		[]byte(`{"protocol":"mew/v0.4","id":"expire-not-reserved","from":"ledgers","kind":"mcp/proposal","payload":{"method":"m"}}`),
		[]byte(`{"protocol":"mew/v0.4","id":"my-gap:1","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`),
	} {
		if _, err := PrepareStandalone("default", raw, SubmitLimits{}, now); err != nil {
			t.Errorf("%s refused: %v", raw, err)
		}
	}
	if _, _, err := PrepareEnvelope("default", ExpireEnvelope("default", "p1", now), SubmitLimits{}, now, false); err != nil {
		t.Errorf("system path refused the ledger's expire: %v", err)
	}
}
