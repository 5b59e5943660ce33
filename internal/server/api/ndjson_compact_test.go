package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/server/api"
)

// TestNDJSONRefusalsCompact (issue 29 item 8): a body of thousands of `{}`
// lines is answered with one line per refusal up to
// api.CompactRefusalsAfter, then one line per run of identical refusals
// ({"line":first,"last_line":last,"error":..}); a good line between runs
// is stored and answered on its own, in order.
func TestNDJSONRefusalsCompact(t *testing.T) {
	l := start(t)
	var body bytes.Buffer
	body.WriteString(strings.Repeat("{}\n", 3000))
	body.WriteString(goldenProposal + "\n")
	body.WriteString(strings.Repeat("{}\n", 2000))
	status, _, out := l.do(http.MethodPost, "/v1/events", "application/x-ndjson", body.Bytes())
	if status != http.StatusOK {
		t.Fatalf("status %d: %.300s", status, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n := api.CompactRefusalsAfter
	if len(lines) != n+3 {
		t.Fatalf("%d answer lines (%d bytes), want %d", len(lines), len(out), n+3)
	}
	type res struct {
		Line     int             `json:"line"`
		LastLine int             `json:"last_line"`
		Seq      uint64          `json:"seq"`
		Error    json.RawMessage `json:"error"`
	}
	var got []res
	for _, ln := range lines {
		var r res
		if err := json.Unmarshal([]byte(ln), &r); err != nil {
			t.Fatalf("%v in %q", err, ln)
		}
		got = append(got, r)
	}
	for i := range n {
		if got[i].Line != i+1 || got[i].LastLine != 0 || got[i].Error == nil {
			t.Fatalf("answer %d: %+v", i, got[i])
		}
	}
	if r := got[n]; r.Line != n+1 || r.LastLine != 3000 || r.Error == nil {
		t.Fatalf("first run: %+v", r)
	}
	if r := got[n+1]; r.Line != 3001 || r.Seq != 1 || r.Error != nil {
		t.Fatalf("the good line: %+v", r)
	}
	if r := got[n+2]; r.Line != 3002 || r.LastLine != 5001 || r.Error == nil {
		t.Fatalf("second run: %+v", r)
	}
}
