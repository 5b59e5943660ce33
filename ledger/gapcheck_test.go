package ledger

import (
	"errors"
	"testing"
	"time"
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
		{`[]`, CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z"} {}`, CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"yesterday"}`, CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","seq":1}`, CodeNotJSON, ""},
		{`{"disconnected_at":"2026-11-24T05:00:00Z"}`, CodeMissingField, "bridge"},
		{`{"bridge":"` + string(long) + `","disconnected_at":"2026-11-24T05:00:00Z"}`, CodeTooLong, "bridge"},
		{`{"bridge":"ledger","disconnected_at":"2026-11-24T05:00:00Z"}`, CodeBadValue, "bridge"},
		{`{"bridge":"rec"}`, CodeMissingField, "disconnected_at"},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","reconnected_at":"2026-11-24T04:59:59Z"}`, CodeBadValue, "reconnected_at"},
	} {
		_, err := ParseGap([]byte(tc.body))
		r, ok := AsRefusal(err)
		if !ok || !errors.Is(err, ErrRefused) || r.Code != tc.code || r.Field != tc.field {
			t.Errorf("%.80s: %v, want %s %q", tc.body, err, tc.code, tc.field)
		}
	}
}
