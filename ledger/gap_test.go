package ledger

import (
	"encoding/json"
	"testing"
	"time"
)

func TestGapEnvelope(t *testing.T) {
	at := time.Date(2026, 11, 24, 6, 0, 0, 5, time.FixedZone("x", 3600))
	raw, err := GapEnvelope(Gap{Bridge: "ledger-recorder", MEWSpace: "demo", LastEnvelope: "env-9", DisconnectedAt: at, Reason: "read: EOF"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got["kind"] != KindGap || got["from"] != LedgerSender || got["id"] != "gap:ledger-recorder/1795496400000000005" {
		t.Fatalf("envelope %s", raw)
	}
	p := got["payload"].(map[string]any)
	if p["disconnected_at"] != "2026-11-24T05:00:00.000000005Z" || p["last_envelope"] != "env-9" {
		t.Fatalf("payload %s", raw)
	}
	if _, ok := p["reconnected_at"]; ok {
		t.Fatalf("zero reconnected_at written: %s", raw)
	}
	if _, err := GapEnvelope(Gap{DisconnectedAt: at}); err == nil {
		t.Fatal("gap without bridge accepted")
	}
	if _, err := GapEnvelope(Gap{Bridge: "b"}); err == nil {
		t.Fatal("gap without time accepted")
	}
}
