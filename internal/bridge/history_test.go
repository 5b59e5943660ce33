package bridge_test

import (
	"testing"

	"github.com/mewledger/ledger/internal/bridge"
)

// TestHistoryRecords: the rules of the history reader on hand-made
// records (the real logs are in TestCapturesThroughServe).
func TestHistoryRecords(t *testing.T) {
	h := bridge.NewHistory("s")
	type want struct {
		ok     bool
		sender string
	}
	for i, tc := range []struct {
		line string
		want want
	}{
		{`{"event":"received","envelope":{"type":"join","participantId":"a"},"participant":"a","space_id":"s"}`, want{}},
		{`{"event":"received","id":"e1","envelope":{"id":"e1"},"participant":"mallory","space_id":"s"}`, want{}},
		{`{"event":"delivered","id":"e1","envelope":{"id":"e1","from":"coder"},"participant":"x","space_id":"s","metadata":{"source_participant":"mallory"}}`, want{true, "mallory"}},
		{`{"event":"delivered","id":"e1","envelope":{"id":"e1","from":"coder"},"participant":"y","space_id":"s","metadata":{"source_participant":"mallory"}}`, want{}}, // same broadcast
		{`{"event":"received","id":"e1","envelope":{"id":"e1"},"participant":"bob","space_id":"s"}`, want{}},                                                           // id reused
		{`{"event":"delivered","id":"e1","envelope":{"id":"e1","from":"bob"},"participant":"x","space_id":"s"}`, want{true, "bob"}},
		{`{"event":"received","id":"e2","envelope":{"id":"e2"},"participant":"p","space_id":"s"}`, want{}},
		{`{"event":"rejected","id":"e2","envelope":{"id":"e2"},"participant":"p","space_id":"s"}`, want{}},
		{`{"event":"delivered","id":"e3","envelope":{"id":"e3"},"participant":"x","space_id":"s","metadata":{"source_participant":"q"}}`, want{true, "q"}}, // no received record
		{`{"event":"delivered","id":"e4","envelope":{"id":"e4"},"participant":"x","space_id":"s"}`, want{}},                                                // no sender at all
		{`{"event":"received","id":"e5","envelope":{"id":"e5"},"participant":"p","space_id":"other"}`, want{}},
		{`{"event":"delivered","id":"e5","envelope":{"id":"e5"},"participant":"x","space_id":"other","metadata":{"source_participant":"p"}}`, want{}}, // other space
		{``, want{}},
	} {
		d, ok, err := h.Line([]byte(tc.line))
		if err != nil || ok != tc.want.ok || d.Sender != tc.want.sender {
			t.Errorf("line %d: %+v %v %v, want %+v", i, d, ok, err, tc.want)
		}
	}
	if _, _, err := h.Line([]byte(`not json`)); err == nil {
		t.Error("a line that is not a record was taken")
	}
}
