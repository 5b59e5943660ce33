package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// postMarkedEnv POSTs envelope env from bridge session mark and returns
// its seq.
func (l *ledgerT) postMarkedEnv(env string, mark ledger.BridgeMark) uint64 {
	l.t.Helper()
	req, err := http.NewRequest(http.MethodPost, l.url+"/v1/events", strings.NewReader(env))
	if err != nil {
		l.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ledger.HeaderBridge, mark.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r api.AppendResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted || r.Seq == 0 {
		l.t.Fatalf("POST %s: %d %+v %v", env, resp.StatusCode, r, err)
	}
	return r.Seq
}

// TestHoleCrossing: a proposal whose lifecycle crosses a hole carries
// hole_crossing in GET /v1/proposals/{id} and in the list (the span, open
// while pending, and the holes crossed); one decided before the hole or
// created after it carries nothing and is served byte for byte as when
// the space had no hole; a rebuild answers the same; as of a point inside
// the hole, the hole is open.
func TestHoleCrossing(t *testing.T) {
	l := start(t)
	ctx := context.Background()
	mark := demoMark
	gap := l.gapWriter(t, ctx)
	withdraw := `{"protocol":"mew/v0.4","id":"q1-w","from":"alice","kind":"mcp/withdraw","correlation_id":["q1"],"payload":{"reason":"no_longer_needed"}}`
	fulfil := `{"protocol":"mew/v0.4","id":"p1-f","from":"bob","kind":"mcp/request","correlation_id":["p1"],"payload":{"jsonrpc":"2.0","id":1,"method":"m"}}`

	l.postMarked("q1", mark("a", "a1"))
	l.postMarkedEnv(withdraw, mark("b", "b1"))
	p1 := l.postMarked("p1", mark("a", "a1"))
	f1 := l.postMarked("f1", mark("b", "b1"))
	p2 := l.postMarked("p2", mark("a", "a1"))
	var q1Before []byte
	{
		st, _, b := l.do(http.MethodGet, fmt.Sprintf("/v1/proposals/q1?min_seq=%d", p2), "", nil)
		if st != http.StatusOK {
			t.Fatalf("q1: %d %s", st, b)
		}
		q1Before = b
	}
	// b stops after f1, a after p2: nobody records after p2 until p1's
	// fulfilment.
	gap("b", "b1", "f1", f1, true)
	gap("a", "a1", "p2", p2, true)
	after := l.postMarkedEnv(fulfil, mark("a", "a2"))
	p3 := l.postMarked("p3", mark("b", "b2"))

	var hs api.Holes
	l.get(fmt.Sprintf("/v1/holes?min_seq=%d", p3), http.StatusOK, &hs)
	if len(hs.Holes) != 1 || hs.Holes[0].After == nil || hs.Holes[0].After.Seq != p2 || hs.Holes[0].Before == nil || hs.Holes[0].Before.Seq != after {
		t.Fatalf("holes: %+v", hs.Holes)
	}
	get := func(path string) *api.Proposal {
		t.Helper()
		var p api.Proposal
		l.get(path, http.StatusOK, &p)
		return &p
	}
	want := func(what string, c *api.HoleCrossing, first, last uint64, open bool) {
		t.Helper()
		if c == nil || c.FirstSeq != first || c.LastSeq != last || c.Open != open || len(c.Holes) != 1 ||
			c.Holes[0].After == nil || c.Holes[0].After.Seq != p2 || fmt.Sprint(c.Holes[0].Recorders) != "[a b]" {
			t.Fatalf("%s: hole_crossing %+v", what, c)
		}
	}
	want("p1, created before the hole and fulfilled after it", get("/v1/proposals/p1").HoleCrossing, p1, after, false)
	if c := get("/v1/proposals/p1").HoleCrossing; c.Holes[0].Before == nil || c.Holes[0].Before.Seq != after || c.Holes[0].Open {
		t.Fatalf("p1's hole: %+v", c.Holes[0])
	}
	want("f1, pending", get("/v1/proposals/f1").HoleCrossing, f1, f1, true)
	want("p2, pending, stored just before the hole", get("/v1/proposals/p2").HoleCrossing, p2, p2, true)
	if c := get("/v1/proposals/q1").HoleCrossing; c != nil {
		t.Fatalf("q1, withdrawn before the hole: %+v", c)
	}
	if c := get("/v1/proposals/p3").HoleCrossing; c != nil {
		t.Fatalf("p3, created after the hole: %+v", c)
	}
	// q1 crosses nothing: the same bytes as before the space had a hole.
	if st, _, b := l.do(http.MethodGet, "/v1/proposals/q1", "", nil); st != http.StatusOK || !bytes.Equal(b, q1Before) {
		t.Fatalf("q1 now: %d\n%s\nbefore:\n%s", st, b, q1Before)
	}

	// The list's items say the same.
	var list api.List
	l.get("/v1/proposals?limit=100", http.StatusOK, &list)
	crossing := map[string]bool{}
	for _, p := range list.Proposals {
		crossing[p.ID] = p.HoleCrossing != nil
	}
	if len(list.Proposals) != 5 || !crossing["p1"] || !crossing["f1"] || !crossing["p2"] || crossing["q1"] || crossing["p3"] {
		t.Fatalf("list: %v", crossing)
	}

	// A rebuild answers the same, byte for byte: the list (hole_crossing
	// included) and the hole changes of /v1/changes.
	read := func(path string) []byte {
		t.Helper()
		st, _, b := l.do(http.MethodGet, path, "", nil)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, b)
		}
		return b
	}
	listBefore, changesBefore := read("/v1/proposals?limit=100"), read("/v1/changes")
	if st, _, b := l.do(http.MethodPost, "/v1/ops/rebuild?wait=true", "", nil); st != http.StatusOK {
		t.Fatalf("rebuild: %d %s", st, b)
	}
	if got := read(fmt.Sprintf("/v1/proposals?limit=100&min_seq=%d", p3)); !bytes.Equal(got, listBefore) {
		t.Fatalf("the list after the rebuild:\n%s\nbefore:\n%s", got, listBefore)
	}
	if got := read("/v1/changes"); !bytes.Equal(got, changesBefore) {
		t.Fatalf("/v1/changes after the rebuild:\n%s\nbefore:\n%s", got, changesBefore)
	}

	// As of the point just before p1's fulfilment, the hole is open and
	// p1 pending: it crosses to the log's end.
	if c := get(fmt.Sprintf("/v1/proposals/p1?as_of_seq=%d", after-1)).HoleCrossing; c == nil || !c.Open || c.LastSeq != p1 || len(c.Holes) != 1 || !c.Holes[0].Open {
		t.Fatalf("p1 as of seq %d: %+v", after-1, c)
	}
	// As of p2, before the gaps, there is no hole.
	if c := get(fmt.Sprintf("/v1/proposals/p1?as_of_seq=%d", p2)).HoleCrossing; c != nil {
		t.Fatalf("p1 as of seq %d: %+v", p2, c)
	}
}
