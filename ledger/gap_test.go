package ledger

import (
	"encoding/json"
	"strings"
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
	if got["kind"] != KindGap || got["from"] != LedgerSender || !strings.HasPrefix(got["id"].(string), "gap:ledger-recorder/1795496400000000005/") {
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

// TestGapIDIdentity: a gap's id is unique for its recorder, MEW space,
// session and window (the last stored envelope, the start and the end),
// and the same for a repeated report whatever its reason or noticing
// time (issue 38: a restarted bridge that stored nothing new reuses
// neither its last run's start nor its id).
func TestGapIDIdentity(t *testing.T) {
	at := time.Date(2026, 11, 24, 6, 0, 0, 5, time.UTC)
	base := Gap{Bridge: "rec", MEWSpace: "demo", Session: "s1", LastEnvelope: "env-9", LastSeq: 9,
		DisconnectedAt: at, ReconnectedAt: at.Add(time.Second), NoticedAt: at.Add(time.Millisecond), Reason: "read: EOF"}
	same := base
	same.Reason, same.NoticedAt, same.Dropped = "other words", at.Add(time.Hour), 3
	if GapID(same) != GapID(base) {
		t.Fatalf("a repeated report changed id: %s vs %s", GapID(same), GapID(base))
	}
	variants := map[string]func(*Gap){
		"bridge":         func(g *Gap) { g.Bridge = "rec2" },
		"mew_space":      func(g *Gap) { g.MEWSpace = "other" },
		"session":        func(g *Gap) { g.Session = "s2" },
		"last_envelope":  func(g *Gap) { g.LastEnvelope = "env-8" },
		"last_seq":       func(g *Gap) { g.LastSeq = 8 },
		"disconnected":   func(g *Gap) { g.DisconnectedAt = at.Add(1) },
		"reconnected":    func(g *Gap) { g.ReconnectedAt = at.Add(2 * time.Second) },
		"open":           func(g *Gap) { g.ReconnectedAt = time.Time{} },
		"session/bridge": func(g *Gap) { g.Bridge, g.Session = "rec/s", "" },
	}
	seen := map[string]string{GapID(base): "base"}
	for name, f := range variants {
		g := base
		f(&g)
		id := GapID(g)
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share the gap id %s", name, other, id)
		}
		seen[id] = name
		if len(id) > MaxGapIDBytes {
			t.Errorf("%s: id of %d bytes, over MaxGapIDBytes", name, len(id))
		}
	}
	long := base
	long.Bridge = strings.Repeat("b", MaxIDBytes)
	long.DisconnectedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	if id := GapID(long); len(id) > MaxGapIDBytes {
		t.Errorf("longest id %d bytes, over MaxGapIDBytes %d", len(id), MaxGapIDBytes)
	}
}
