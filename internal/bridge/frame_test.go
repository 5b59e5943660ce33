package bridge_test

import (
	"path/filepath"
	"testing"

	"github.com/mewledger/ledger/internal/bridge"
)

// TestFilterOnCaptures: on every real capture, the filter appends exactly
// the lines expected.json calls lifecycle (but responses to plain
// requests, which would stay orphans for ever) and skips the others.
func TestFilterOnCaptures(t *testing.T) {
	e := loadExpected(t)
	for _, name := range scenarioNames(e) {
		sc := e.Scenarios[name]
		t.Run(name, func(t *testing.T) {
			lines := readLines(t, filepath.Join(capturesDir, sc.File))
			if len(lines) != sc.Envelopes {
				t.Fatalf("%d lines, expected.json says %d", len(lines), sc.Envelopes)
			}
			want := map[int]bool{}
			for _, l := range sc.Lifecycle {
				want[l.Line] = true
			}
			for _, o := range sc.Orphans {
				for _, l := range sc.Lifecycle {
					if l.Line == o.Line && l.Kind == "mcp/response" {
						want[l.Line] = false
					}
				}
			}
			f := bridge.NewFilter(nil)
			for i, l := range lines {
				v := f.Classify(l)
				if v.Append != want[i+1] {
					t.Errorf("line %d (%s %s): append %v (%s), want %v", i+1, v.Kind, v.ID, v.Append, v.Skip, want[i+1])
				}
			}
		})
	}
}

func TestFilterFrames(t *testing.T) {
	f := bridge.NewFilter(nil)
	for _, tc := range []struct {
		frame  string
		append bool
		kind   string
	}{
		{`#s1#{"chunk":1}`, false, bridge.KindStream},
		{`not json`, false, bridge.KindNotJSON},
		{`{"protocol":"mew/v0.4","kind":"system/error","payload":{"error":"bad","code":"VALIDATION_ERROR"}}`, false, "system/error"},
		{`{"no":"kind"}`, false, bridge.KindNoKind},
		{`{"protocol":"mew/v0.4","id":"x1","from":"a","kind":"chat","payload":{"text":"hi"}}`, false, "chat"},
		{`{"protocol":"mew/v0.4","id":"x2","from":"a","kind":"chat","correlation_id":"p1","payload":{"text":"why"}}`, true, "chat"},
		{`{"protocol":"mew/v0.4","id":"x3","from":"a","kind":"mcp/withdraw","correlation_id":"p1","payload":{"reason":"other"}}`, true, "mcp/withdraw"},
		{`{"protocol":"mew/v0.4","id":"x4","from":"ledger","kind":"ledger/expire","correlation_id":["p1"],"payload":{"deadline":"2026-01-01T00:00:00Z"}}`, false, "ledger/expire"},
		{`{"protocol":"mew/v0.4","id":"x5","kind":"mcp/proposal","payload":{"method":"tools/call"}}`, true, "mcp/proposal"}, // no from: the ledger refuses it
		{`{"protocol":"mew/v0.4","id":"x6","from":"a","kind":"something/else","payload":{}}`, false, bridge.KindOther},
		{`{"protocol":"mew/v0.4","id":"x7","from":"a","kind":"capability/grant","payload":{}}`, false, "capability/grant"},
	} {
		v := f.Classify([]byte(tc.frame))
		if v.Append != tc.append || v.Kind != tc.kind {
			t.Errorf("%s: append %v kind %q (%s), want %v %q", tc.frame, v.Append, v.Kind, v.Skip, tc.append, tc.kind)
		}
	}
	// A response to a plain request is skipped; to a fulfilment, sent.
	f.Classify([]byte(`{"protocol":"mew/v0.4","id":"r1","from":"a","kind":"mcp/request","payload":{"method":"tools/list"}}`))
	if v := f.Classify([]byte(`{"protocol":"mew/v0.4","id":"s1","from":"b","kind":"mcp/response","correlation_id":["r1"],"payload":{"result":{}}}`)); v.Append {
		t.Error("a response to a plain request was sent")
	}
	if v := f.Classify([]byte(`{"protocol":"mew/v0.4","id":"s2","from":"b","kind":"mcp/response","correlation_id":["f1"],"payload":{"result":{}}}`)); !v.Append {
		t.Error("a response to an unknown request was not sent")
	}
	// A chat threaded under a plain chat is skipped, and so is a reply to
	// it; a chat naming a proposal first is sent (the fold files a chat under its first correlation id).
	f.Classify([]byte(`{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","payload":{"text":"hi"}}`))
	for _, tc := range []struct {
		frame  string
		append bool
	}{
		{`{"protocol":"mew/v0.4","id":"c2","from":"b","kind":"chat","correlation_id":["c1"],"payload":{"text":"re"}}`, false},
		{`{"protocol":"mew/v0.4","id":"c3","from":"a","kind":"chat","correlation_id":"c2","payload":{"text":"re re"}}`, false},
		{`{"protocol":"mew/v0.4","id":"c4","from":"a","kind":"chat","correlation_id":["p1","c1"],"payload":{"text":"both"}}`, true},
		{`{"protocol":"mew/v0.4","id":"c5","from":"a","kind":"chat","correlation_id":["r1"],"payload":{"text":"on a plain request"}}`, false},
	} {
		if v := f.Classify([]byte(tc.frame)); v.Append != tc.append || (!v.Append && v.Skip != bridge.SkipPlainThread) {
			t.Errorf("%s: append %v (%s), want %v", tc.frame, v.Append, v.Skip, tc.append)
		}
	}
	// What only the ledger writes is skipped as reserved.
	for _, frame := range []string{
		`{"protocol":"mew/v0.4","id":"x8","from":"ledger","kind":"mcp/withdraw","correlation_id":["p1"],"payload":{}}`,
		`{"protocol":"mew/v0.4","id":"gap:x/1","from":"a","kind":"mcp/withdraw","correlation_id":["p1"],"payload":{}}`,
		`{"protocol":"mew/v0.4","id":"expire:p1","from":"a","kind":"chat","correlation_id":["p1"],"payload":{"text":"x"}}`,
	} {
		if v := f.Classify([]byte(frame)); v.Append || v.Skip != bridge.SkipReserved {
			t.Errorf("%s: append %v (%s), want skipped as reserved", frame, v.Append, v.Skip)
		}
	}
}
