package ledger

import (
	"errors"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
)

func TestParseGap(t *testing.T) {
	g, err := ParseGap([]byte(`{"bridge":"rec","mew_space":"m","gateway":"ws://h:1","last_envelope":"e1","disconnected_at":"2026-11-24T05:00:00Z","reconnected_at":"2026-11-24T05:00:01Z","reason":"read: EOF"}`))
	if err != nil || g.Bridge != "rec" || g.LastEnvelope != "e1" || !g.ReconnectedAt.Equal(time.Date(2026, 11, 24, 5, 0, 1, 0, time.UTC)) {
		t.Fatalf("%+v %v", g, err)
	}
	long := make([]byte, MaxIDBytes+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, tc := range []struct{ body, code, field string }{
		{`[]`, api.CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z"} {}`, api.CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"yesterday"}`, api.CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","seq":1}`, api.CodeNotJSON, ""},
		{`{"disconnected_at":"2026-11-24T05:00:00Z"}`, api.CodeMissingField, "bridge"},
		{`{"bridge":"` + string(long) + `","disconnected_at":"2026-11-24T05:00:00Z"}`, api.CodeTooLong, "bridge"},
		{`{"bridge":"ledger","disconnected_at":"2026-11-24T05:00:00Z"}`, api.CodeBadValue, "bridge"},
		{`{"bridge":"rec"}`, api.CodeMissingField, "disconnected_at"},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","reconnected_at":"2026-11-24T04:59:59Z"}`, api.CodeBadValue, "reconnected_at"},
		// Past 2262 (issue 29 item 8): Unix nanoseconds overflow.
		{`{"bridge":"rec","disconnected_at":"2263-01-01T00:00:00Z"}`, api.CodeBadValue, "disconnected_at"},
		{`{"bridge":"rec","disconnected_at":"1600-01-01T00:00:00Z"}`, api.CodeBadValue, "disconnected_at"},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","reconnected_at":"9999-01-01T00:00:00Z"}`, api.CodeBadValue, "reconnected_at"},
	} {
		_, err := ParseGap([]byte(tc.body))
		r, ok := AsRefusal(err)
		if !ok || !errors.Is(err, ErrRefused) || r.Code != tc.code || r.Field != tc.field {
			t.Errorf("%.80s: %v, want %s %q", tc.body, err, tc.code, tc.field)
		}
	}
}

// TestGapIDNeverShared: times beyond what Unix nanoseconds hold (which
// ParseGap refuses, but a Gap built in code may carry) still give
// distinct ids, distinct from every in-range one (issue 29 item 8).
func TestGapIDNeverShared(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"2263-01-01T00:00:00Z", "2300-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"1600-01-01T00:00:00Z", "2262-04-11T23:47:16.854775807Z", "1970-01-01T00:00:00Z", "2026-11-24T05:00:00Z"} {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		id := GapID(Gap{Bridge: "rec", DisconnectedAt: at})
		if other, dup := seen[id]; dup {
			t.Fatalf("%s and %s share the gap id %s", s, other, id)
		}
		seen[id] = s
	}
}
