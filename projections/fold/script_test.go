package fold_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/testkit/foldscript"
)

// TestFoldScripts runs the fold's data-driven scripts (testdata/fold, the
// commands are package foldscript's) on the in-memory state. After a
// change of the fold's output, `go test ./projections/fold -run
// TestFoldScripts -rewrite` rewrites the expected outputs (review the
// diff); package projections runs the same scripts against Pebble.
func TestFoldScripts(t *testing.T) {
	foldscript.Walk(t, "testdata/fold", nil)
}

// TestProposalJSONArrays: the lists SPEC §7 defines as arrays stay arrays
// (never null) through the fold's clone-and-put cycle.
func TestProposalJSONArrays(t *testing.T) {
	s := foldscript.New()
	for _, line := range []string{
		`{"protocol":"mew/v0.4","id":"p","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`,
		`{"protocol":"mew/v0.4","id":"n","from":"b","kind":"chat","correlation_id":["p"],"payload":{"text":"hi"}}`,
	} {
		if _, err := s.Folder.Apply(s.State, s.ParseLine(t, "default", line)); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := s.State.Proposal("default", "p")
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"to":[]`, `"rejections":[]`, `"fulfillments":[]`, `"anomalies":[]`} {
		if !strings.Contains(string(j), field) {
			t.Errorf("proposal JSON lacks %s: %s", field, j)
		}
	}
}
