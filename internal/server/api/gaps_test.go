package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// TestGapsRoute: gaps the ledger appends for a bridge (AppendSystem, as the
// bridge's endpoints do) are listed by GET /v1/gaps oldest first, paged,
// counted in /v1/stats; a client cannot POST one (reserved_kind).
func TestGapsRoute(t *testing.T) {
	l := start(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	var last uint64
	for i := range 3 {
		g := ledger.Gap{Bridge: "rec", MEWSpace: "demo", Gateway: "ws://gw", LastEnvelope: fmt.Sprintf("env-%d", i),
			DisconnectedAt: at.Add(time.Duration(i) * time.Minute), Reason: "read: EOF"}
		if i < 2 {
			g.ReconnectedAt = g.DisconnectedAt.Add(time.Second)
		}
		raw, err := ledger.GapEnvelope(g)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.app.Appender().AppendSystem(ctx, "", raw)
		if err != nil {
			t.Fatal(err)
		}
		last = res.Seq
		l.wantError(http.MethodPost, "/v1/events", "application/json", raw, http.StatusBadRequest, api.CodeReservedKind, "kind")
	}
	var all api.Gaps
	l.get(fmt.Sprintf("/v1/gaps?min_seq=%d", last), http.StatusOK, &all)
	if len(all.Gaps) != 3 || all.NextCursor != "" {
		t.Fatalf("gaps %+v", all)
	}
	for i, g := range all.Gaps {
		if g.LastEnvelope != fmt.Sprintf("env-%d", i) || g.Bridge != "rec" || g.MEWSpace != "demo" || g.Seq == 0 ||
			!strings.HasPrefix(g.ID, fmt.Sprintf("gap:rec/%d/", at.Add(time.Duration(i)*time.Minute).UnixNano())) {
			t.Fatalf("gap %d: %+v", i, g)
		}
		if (g.ReconnectedAt == nil) != (i == 2) {
			t.Fatalf("gap %d reconnected_at %v", i, g.ReconnectedAt)
		}
	}
	var page api.Gaps
	l.get("/v1/gaps?limit=2", http.StatusOK, &page)
	if len(page.Gaps) != 2 || page.NextCursor != fmt.Sprint(all.Gaps[1].Seq) {
		t.Fatalf("page 1 %+v", page)
	}
	var page2 api.Gaps
	l.get("/v1/gaps?limit=2&cursor="+page.NextCursor, http.StatusOK, &page2)
	if len(page2.Gaps) != 1 || page2.NextCursor != "" || page2.Gaps[0].Seq != all.Gaps[2].Seq {
		t.Fatalf("page 2 %+v", page2)
	}
	var other api.Gaps
	l.get("/v1/gaps?space=elsewhere", http.StatusOK, &other)
	if other.Gaps == nil || len(other.Gaps) != 0 {
		t.Fatalf("other space: %+v", other)
	}
	var st api.Stats
	l.get("/v1/stats", http.StatusOK, &st)
	if st.Gaps != 3 {
		t.Fatalf("stats gaps %d", st.Gaps)
	}
	l.wantError(http.MethodGet, "/v1/gaps?limit=0", "", nil, http.StatusBadRequest, api.CodeBadQuery, "limit")
	l.wantError(http.MethodGet, "/v1/gaps?cursor=x", "", nil, http.StatusBadRequest, api.CodeBadQuery, "cursor")
	l.wantError(http.MethodGet, "/v1/gaps?state=pending", "", nil, http.StatusBadRequest, api.CodeUnknownParameter, "state")
}

// TestFormsThroughAPI: the seeds' lifecycle forms go through POST
// /v1/events and show on the proposal; the list filters form and target
// (over the targeting fields) find them; stats count note kinds.
func TestFormsThroughAPI(t *testing.T) {
	l := start(t)
	l.post(`{"protocol":"mcpx/v0.1","id":"t1","from":"coord","kind":"proposal","payload":{"method":"tools/call","targeting":{"preferred":["trusted-agent"],"exclusive":true,"exclusive_timeout":3000},"params":{}}}`)
	l.post(`{"protocol":"mew/v0.4","id":"t2","from":"coord","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`)
	l.post(`{"protocol":"mew/v0.4","id":"b1","from":"agent-3","kind":"bid","payload":{"proposal_id":"t1","confidence":0.9,"estimated_time":500}}`)
	l.post(`{"protocol":"meup/v0.1","id":"s1","from":"trusted-agent","correlationId":"t1","kind":"meup.lifecycle","payload":{"operation":"status","target":"proposal","status":"processing"}}`)
	res := l.post(`{"protocol":"mew/v0.4","id":"c1","from":"coord","kind":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"t2","reason":"no longer needed"}}}`)
	var p api.Proposal
	l.get(fmt.Sprintf("/v1/proposals/t1?min_seq=%d", res.Seq), http.StatusOK, &p)
	if len(p.Targets) != 1 || p.Targets[0].ID != "trusted-agent" || p.Exclusive == nil || len(p.Bids) != 1 ||
		len(p.Statuses) != 1 || p.Statuses[0].Status != "processing" {
		t.Fatalf("t1 %+v", p)
	}
	var p2 api.Proposal
	l.get("/v1/proposals/t2", http.StatusOK, &p2)
	if p2.State != api.StateWithdrawn {
		t.Fatalf("t2 %+v", p2)
	}
	for q, want := range map[string]string{
		"target=trusted-agent":             "t1",
		"form=bid":                         "t1",
		"form=meup.lifecycle/status":       "t1",
		"form=mcp/notifications/cancelled": "t2",
	} {
		var page api.List
		l.get("/v1/proposals?"+q, http.StatusOK, &page)
		if len(page.Proposals) != 1 || page.Proposals[0].ID != want {
			t.Errorf("%s: %d proposals", q, len(page.Proposals))
		}
	}
	var st api.Stats
	l.get("/v1/stats", http.StatusOK, &st)
	if st.NoteKinds["bid"] != 1 || st.NoteKinds["status"] != 1 {
		t.Fatalf("note kinds %v", st.NoteKinds)
	}
	var h api.History
	l.get("/v1/proposals/t1/history", http.StatusOK, &h)
	if len(h.Events) != 3 || h.Events[1].Form != "bid" || h.Events[2].Form != "meup.lifecycle/status" {
		t.Fatalf("history %+v", h.Events)
	}
}
