package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// TestPublishStreamed: `ledger publish` with several streamed requests in
// a row prints one result per line in input order, the local refusal of
// an oversize line in its place, and the ledger stores the lines in input
// order.
func TestPublishStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	s := startServer(t, buildBinary(t, dir), filepath.Join(dir, "data"))
	var lines []string
	for i := 1; i <= 60; i++ {
		switch i {
		case 20:
			lines = append(lines, `{"x":"`+strings.Repeat("y", ledger.MaxEnvelopeBytes)+`"}`)
		case 30:
			lines = append(lines, "")
		default:
			lines = append(lines, fmt.Sprintf(`{"protocol":"mew/v0.4","id":"pipe-%d","from":"agent-p","kind":"mcp/proposal","payload":{"method":"m"}}`, i))
		}
	}
	r := s.cli(strings.Join(lines, "\n")+"\n", "publish", "--batch", "7")
	if r.code != exitFailed || !strings.Contains(r.stderr, "line 20: oversize") {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var seq uint64
	n := 0
	for dec.More() {
		var res api.AppendResult
		if err := dec.Decode(&res); err != nil {
			t.Fatal(err)
		}
		n++
		want := n
		if n >= 30 {
			want = n + 1 // line 30 is blank: no result
		}
		if res.Line != want {
			t.Fatalf("result %d is for line %d, want %d", n, res.Line, want)
		}
		if want == 20 {
			if res.Error == nil || res.Error.Code != api.CodeOversize {
				t.Fatalf("line 20: %+v", res)
			}
			continue
		}
		if res.Error != nil || res.Seq != seq+1 || res.ID != fmt.Sprintf("pipe-%d", want) {
			t.Fatalf("line %d: %+v after seq %d", want, res, seq)
		}
		seq = res.Seq
	}
	if n != 59 || seq != 58 {
		t.Fatalf("%d results, last seq %d", n, seq)
	}
}
