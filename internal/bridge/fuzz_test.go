package bridge_test

import (
	"testing"

	"github.com/mewledger/ledger/internal/bridge"
)

// FuzzFrame: whatever a gateway (or anyone on the WebSocket) sends, the
// bridge's frame handling never panics, decides the same way for the same
// bytes, sends only frames that name a kind, and its history reader never
// panics either. Seeds: testdata/fuzz/FuzzFrame (real capture frames,
// gateway error frames, stream frames).
func FuzzFrame(f *testing.F) {
	for _, s := range []string{
		`{"protocol":"mew/v0.4","id":"p1","from":"a","kind":"mcp/proposal","payload":{"method":"tools/call"}}`,
		`#stream-1#data`,
		`{"kind":"system/error","payload":{"code":"VALIDATION_ERROR"}}`,
		`{"event":"delivered","id":"p1","envelope":{"id":"p1","kind":"chat"},"participant":"a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		v1 := bridge.NewFilter(nil).Classify(frame)
		v2 := bridge.NewFilter(nil).Classify(frame)
		if v1 != v2 {
			t.Fatalf("two verdicts for the same bytes: %+v %+v", v1, v2)
		}
		if v1.Kind == "" {
			t.Fatalf("no kind label: %+v", v1)
		}
		if v1.Append == (v1.Skip != "") {
			t.Fatalf("append and skip reason disagree: %+v", v1)
		}
		if v1.Append && (v1.Kind == bridge.KindNotJSON || v1.Kind == bridge.KindNoKind || v1.Kind == bridge.KindStream) {
			t.Fatalf("sends a frame without a kind: %+v", v1)
		}
		h := bridge.NewHistory("s")
		if d, ok, err := h.Line(frame); ok && (err != nil || len(d.Envelope) == 0 || d.Sender == "") {
			t.Fatalf("history delivery %+v %v", d, err)
		}
	})
}
