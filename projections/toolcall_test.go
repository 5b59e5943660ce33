package projections

import (
	"strings"
	"testing"

	"github.com/mewledger/ledger/ledger/canon"
)

var toolCallSeeds = []string{
	`{"name":"run","arguments":{"path":"/etc/passwd","cmd":"ls"}}`,
	`{"name":"run","arguments":{"zeta":"z","alpha":"a","n":1}}`,
	`{"name":"run","arguments":{"id":"x","name":"y"}}`,
	`{"name":"run","arguments":{"a":1,"b":true}}`,
	`{"name":"run","arguments":"oops"}`,
	`{"name":"run","arguments":null}`,
	`{"name":7,"arguments":{"url":"http://x"}}`,
	`{"name":1e400,"arguments":{"url":"http://x"}}`,
	`{"uri":1e400,"name":"x"}`,
	`{"Name":"upper","arguments":{"path":"p"}}`,
	`{"name":"a","NAME":"b"}`,
	`{"ARGUMENTS":{"path":"p"},"name":"n"}`,
	`{"argumentſ":{"path":"p"},"name":"n"}`,
	`{"n\u0061me":"esc","arguments":{"p\u0061th":"x","file":"f"}}`,
	`{"name":"tab\tbed","arguments":{"path":"a\"b\\c\u00e9"}}`,
	`{"uri":"file:///x","name":"r"}`,
	`{"uri":{"x":1},"name":"r"}`,
	`{"name":"` + strings.Repeat("é", 150) + `","arguments":{"query":"` + strings.Repeat("x", 300) + `"}}`,
	`{}`,
	`[]`,
	`"x"`,
	`{"arguments":{"b":"2","a":"1","é":"3"}}`,
}

// TestToolCallMatchesJSON checks the scanner against the encoding/json
// decode it replaces, for both kinds of method.
func TestToolCallMatchesJSON(t *testing.T) {
	for _, s := range toolCallSeeds {
		checkToolCall(t, []byte(s))
	}
	if tool, arg := toolCall("tools/call", []byte(`{"name":"run","arguments":{"zeta":"z","cmd":"ls","path":"/p"}}`)); tool != "run" || arg != "/p" {
		t.Fatalf("toolCall = %q, %q; want run, /p", tool, arg)
	}
}

func checkToolCall(t *testing.T, params []byte) {
	t.Helper()
	for _, m := range []string{"tools/call", "resources/read"} {
		gt, ga := toolCall(m, params)
		wt, wa := toolCallJSON(m, params)
		if gt != wt || ga != wa {
			t.Fatalf("toolCall(%q, %s) = %q, %q; encoding/json gives %q, %q", m, params, gt, ga, wt, wa)
		}
	}
}

// FuzzToolCall compares toolCall with toolCallJSON on params canon
// accepts (what a decoded envelope's params are).
func FuzzToolCall(f *testing.F) {
	for _, s := range toolCallSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := canon.Canonical(raw); err != nil {
			return // not what a decoded envelope carries
		}
		checkToolCall(t, raw)
	})
}
