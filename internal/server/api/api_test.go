package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

func TestGoldenSequence(t *testing.T) {
	l := start(t)
	r1 := l.post(goldenProposal)
	r2 := l.post(goldenFulfil)
	r3 := l.post(goldenResponse)
	if r1.ID != "env-req-1" || r1.Duplicate || !(r1.Seq < r2.Seq && r2.Seq < r3.Seq) {
		t.Fatalf("append results %+v %+v %+v", r1, r2, r3)
	}

	var p api.Proposal
	l.get(fmt.Sprintf("/v1/proposals/env-req-1?min_seq=%d", r3.Seq), http.StatusOK, &p)
	if p.State != api.StateFulfilled || p.Proposer != "untrusted-agent" || p.DecidedBy != "human-user" ||
		p.DecidedEvent != "env-fulfill-1" || p.Events != 3 || p.CreatedSeq != r1.Seq || p.UpdatedSeq != r3.Seq ||
		len(p.Fulfillments) != 1 || p.Fulfillments[0].Outcome != "succeeded" || p.Method != "tools/call" ||
		p.Dialect != "mew/v0.4" || !slices.Equal(p.To, []string{"target-agent"}) || len(p.Anomalies) != 0 {
		t.Fatalf("proposal %+v", p)
	}
	// The proposal object carries the contract §7 names.
	_, _, raw := l.do(http.MethodGet, "/v1/proposals/env-req-1", "", nil)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "space", "state", "proposer", "to", "method", "params", "dialect", "created_seq",
		"created_at", "updated_seq", "updated_at", "decided_by", "decided_event", "reason", "rejections",
		"fulfillments", "anomalies", "events"} {
		if _, ok := m[k]; !ok {
			t.Errorf("proposal object has no %q: %s", k, raw)
		}
	}
	// Lists are [] when empty, never null.
	for _, k := range []string{"rejections", "anomalies"} {
		if _, ok := m[k].([]any); !ok {
			t.Errorf("proposal %q is %v, want []", k, m[k])
		}
	}

	var h api.History
	l.get("/v1/proposals/env-req-1/history", http.StatusOK, &h)
	if h.ID != "env-req-1" || h.Space != "default" || len(h.Events) != 3 {
		t.Fatalf("history %+v", h)
	}
	for i, want := range []struct{ id, typ string }{{"env-req-1", "proposal"}, {"env-fulfill-1", "fulfil"}, {"env-resp-1", "response"}} {
		e := h.Events[i]
		if e.ID != want.id || e.Type != want.typ || e.Effect != api.EffectApplied || e.At.IsZero() {
			t.Errorf("history[%d] = %+v, want %s %s applied", i, e, want.id, want.typ)
		}
	}

	var st api.Stats
	l.get("/v1/stats", http.StatusOK, &st)
	if st.Proposals != 1 || st.ByState["fulfilled"] != 1 || st.Events != 3 {
		t.Fatalf("stats %+v", st)
	}
	var status api.Status
	l.get("/v1/status", http.StatusOK, &status)
	if status.StreamSeq != r3.Seq || status.ProjectedSeq != r3.Seq || status.Lag != 0 {
		t.Fatalf("status %+v, want stream and projected at %d", status, r3.Seq)
	}

	// A retried publish is stored once.
	dup := l.post(goldenProposal)
	if !dup.Duplicate || dup.Seq != r1.Seq {
		t.Fatalf("retry: %+v, want duplicate of seq %d", dup, r1.Seq)
	}
}

func TestWithdrawRejectExplain(t *testing.T) {
	l := start(t)
	l.post(proposal("p-w", "agent-a", nil, "tools/call"))
	l.post(withdraw("w-1", "agent-a", "p-w", "no_longer_needed"))
	l.post(chat("c-1", "agent-a", "w-1", "found another way"))
	l.post(proposal("p-r", "agent-a", []string{"fs-agent"}, "tools/call"))
	l.post(reject("r-1", "fs-agent", "p-r", "unsafe"))
	last := l.post(chat("c-2", "fs-agent", "r-1", "it would overwrite the config"))

	var w api.Proposal
	l.get(fmt.Sprintf("/v1/proposals/p-w?min_seq=%d", last.Seq), http.StatusOK, &w)
	if w.State != api.StateWithdrawn || w.Withdrawal == nil || w.Withdrawal.Explanation != "found another way" || w.Reason != "no_longer_needed" {
		t.Fatalf("withdrawn proposal %+v (withdrawal %+v)", w, w.Withdrawal)
	}
	var r api.Proposal
	l.get("/v1/proposals/p-r", http.StatusOK, &r)
	if r.State != api.StateRejected || len(r.Rejections) != 1 || r.Rejections[0].Reason != "unsafe" ||
		r.Rejections[0].Explanation != "it would overwrite the config" {
		t.Fatalf("rejected proposal %+v", r)
	}
	var st api.Stats
	l.get("/v1/stats", http.StatusOK, &st)
	if st.ByState["withdrawn"] != 1 || st.ByState["rejected"] != 1 || st.RejectionReasons["unsafe"] != 1 || st.WithdrawalReasons["no_longer_needed"] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPostRefusals(t *testing.T) {
	l := start(t)
	post := func(path, body string, status int, code, field string) {
		t.Helper()
		l.wantError(http.MethodPost, path, "application/json", []byte(body), status, code, field)
	}
	post("/v1/events", `not json`, 400, "not_json", "")
	post("/v1/events", ``, 400, "not_json", "")
	post("/v1/events", `{"protocol":"mew/v0.4","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, 400, "missing_field", "id")
	post("/v1/events", `{"protocol":"mew/v0.4","id":"x","kind":"mcp/proposal","payload":{"method":"m"}}`, 400, "missing_field", "from")
	post("/v1/events", `{"protocol":"mew/v9","id":"x","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, 400, "unknown_protocol", "protocol")
	post("/v1/events", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"presence","payload":{}}`, 400, "not_lifecycle", "kind")
	post("/v1/events", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/withdraw","payload":{}}`, 400, "missing_correlation", "correlation_id")
	post("/v1/events", `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"ledger/expire","correlation_id":["p"],"payload":{}}`, 400, "reserved_kind", "kind")
	post("/v1/events", `{"protocol":"mew/v0.4","id":"x","from":["a"],"kind":"mcp/proposal","payload":{"method":"m"}}`, 400, "wrong_type", "from")
	post("/v1/events", `{"protocol":"mew/v0.4","id":"`+strings.Repeat("i", 257)+`","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, 400, "too_long", "id")
	post("/v1/events?space="+strings.Repeat("s", 300), goldenProposal, 400, "too_long", "space")
	post("/v1/events?spaec=x", goldenProposal, 400, api.CodeUnknownParameter, "spaec")
	// Over the 1 MiB envelope limit: 413, nothing stored.
	big := `{"protocol":"mew/v0.4","id":"big","from":"a","kind":"mcp/proposal","payload":{"method":"m","params":{"x":"` + strings.Repeat("x", 1<<20) + `"}}}`
	post("/v1/events", big, 413, "oversize", "")

	var st api.Status
	l.get("/v1/status", http.StatusOK, &st)
	if st.StreamSeq != 0 {
		t.Fatalf("refused envelopes changed the stream: %+v", st)
	}
	// The server still serves.
	l.post(goldenProposal)
}

func TestNDJSON(t *testing.T) {
	l := start(t, func(o *app.Options) { o.MaxBatchBytes = 3 << 20 })
	big := `{"protocol":"mew/v0.4","id":"big","from":"a","kind":"mcp/proposal","payload":{"method":"m","params":{"x":"` + strings.Repeat("x", 1<<20) + `"}}}`
	lines := []string{
		goldenProposal,            // 1
		`{"protocol":"mew/v0.4"}`, // 2: refused
		"",                        // 3: blank, skipped
		goldenFulfil,              // 4
		big,                       // 5: oversize line
		"not json\r",              // 6: refused (CRLF line)
		goldenResponse,            // 7
		goldenProposal,            // 8: duplicate of line 1
	}
	body := strings.Join(lines, "\n") + "\n"
	status, h, data := l.do(http.MethodPost, "/v1/events", "application/x-ndjson", []byte(body))
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("status %d content type %q: %s", status, h.Get("Content-Type"), data)
	}
	var got []api.AppendResult
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var r api.AppendResult
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	type want struct {
		line  int
		id    string
		code  string
		field string
		dup   bool
	}
	wants := []want{
		{line: 1, id: "env-req-1"},
		{line: 2, code: "missing_field", field: "id"},
		{line: 4, id: "env-fulfill-1"},
		{line: 5, code: "oversize"},
		{line: 6, code: "not_json"},
		{line: 7, id: "env-resp-1"},
		{line: 8, id: "env-req-1", dup: true},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d results, want %d: %s", len(got), len(wants), data)
	}
	for i, w := range wants {
		g := got[i]
		if g.Line != w.line {
			t.Errorf("result %d: line %d, want %d", i, g.Line, w.line)
		}
		if w.code != "" {
			if g.Error == nil || g.Error.Code != w.code || g.Error.Field != w.field || g.Seq != 0 {
				t.Errorf("line %d: %+v (error %+v), want refusal %s/%s", w.line, g, g.Error, w.code, w.field)
			}
			continue
		}
		if g.Error != nil || g.ID != w.id || g.Seq == 0 || g.Duplicate != w.dup {
			t.Errorf("line %d: %+v (error %+v), want %s dup=%v", w.line, g, g.Error, w.id, w.dup)
		}
	}
	if got[0].Seq != got[6].Seq {
		t.Errorf("duplicate line stored at %d, first at %d", got[6].Seq, got[0].Seq)
	}
	var p api.Proposal
	l.get(fmt.Sprintf("/v1/proposals/env-req-1?min_seq=%d", got[5].Seq), http.StatusOK, &p)
	if p.State != api.StateFulfilled {
		t.Fatalf("state %s", p.State)
	}

	// A body over MaxBatchBytes: 413, nothing appended.
	var before api.Status
	l.get("/v1/status", http.StatusOK, &before)
	huge := strings.Repeat(proposal("p-many", "a", nil, "m")+"\n", (3<<20)/100)
	l.wantError(http.MethodPost, "/v1/events", "application/x-ndjson", []byte(huge), 413, "oversize", "")
	var after api.Status
	l.get("/v1/status", http.StatusOK, &after)
	if after.StreamSeq != before.StreamSeq {
		t.Fatalf("an oversize batch appended events: %d -> %d", before.StreamSeq, after.StreamSeq)
	}
}

func TestReadErrors(t *testing.T) {
	l := start(t)
	l.post(goldenProposal)
	get := func(path string, status int, code, field string) {
		t.Helper()
		l.wantError(http.MethodGet, path, "", nil, status, code, field)
	}
	get("/v1/proposals/nope", 404, "not_found", "id")
	get("/v1/proposals/nope/history", 404, "not_found", "id")
	get("/v1/proposals/env-req-1?space=other", 404, "not_found", "id")
	get("/v1/nothing", 404, "not_found", "")
	get("/v1/proposals?state=bogus", 400, "bad_query", "state")
	get("/v1/proposals?anomaly=bogus", 400, "bad_query", "anomaly")
	get("/v1/proposals?action_type=fly", 400, "bad_query", "action_type")
	get("/v1/proposals?since=yesterday", 400, "bad_query", "since")
	get("/v1/proposals?until=2026-13-01", 400, "bad_query", "until")
	get("/v1/proposals?since=2026-01-02&until=2026-01-01", 400, "bad_query", "until")
	get("/v1/proposals?limit=0", 400, "bad_query", "limit")
	get("/v1/proposals?limit=ten", 400, "bad_query", "limit")
	get("/v1/proposals?limit=1001", 400, "bad_query", "limit")
	get("/v1/proposals?cursor=!!!", 400, "bad_query", "cursor")
	get("/v1/proposals?cursor=AAAA", 400, "bad_query", "cursor")
	get("/v1/proposals?state=pending&state=fulfilled", 400, "bad_query", "state")
	get("/v1/proposals?stat=pending", 400, "unknown_parameter", "stat")
	get("/v1/proposals/env-req-1?min_seq=-1", 400, "bad_query", "min_seq")
	get("/v1/stats?min_seq=x", 400, "bad_query", "min_seq")
	get("/v1/stats?space="+url.QueryEscape(strings.Repeat("s", 300)), 400, "bad_query", "space")
	e := l.wantError(http.MethodDelete, "/v1/proposals/env-req-1", "", nil, 405, "method_not_allowed", "")
	if !strings.Contains(e.Message, "GET") {
		t.Errorf("405 message does not say what is allowed: %s", e.Message)
	}
	l.wantError(http.MethodPut, "/v1/events", "", nil, 405, "method_not_allowed", "")
	// A path that is not clean is redirected to the clean one, as the mux does.
	status, h, _ := l.do(http.MethodGet, "/v1//stats", "", nil)
	if status/100 != 3 || h.Get("Location") != "/v1/stats" {
		t.Errorf("GET /v1//stats: %d Location %q", status, h.Get("Location"))
	}
}

func TestHistoryOfOrphansAndGarbage(t *testing.T) {
	l := start(t)
	// A rejection of a proposal that does not exist yet: an orphan.
	r := l.post(reject("r-early", "fs-agent", "p-later", "unsafe"))
	var h api.History
	l.get(fmt.Sprintf("/v1/proposals/p-later/history?min_seq=%d", r.Seq), http.StatusOK, &h)
	if len(h.Events) != 1 || h.Events[0].Effect != api.EffectOrphan {
		t.Fatalf("history %+v", h)
	}
	l.wantError(http.MethodGet, "/v1/proposals/p-later", "", nil, 404, "not_found", "id")

	// Garbage published straight onto a ledger subject, bypassing
	// validation: kept, shown as invalid, and the projector goes on.
	ack, err := l.app.JetStream().Publish(context.Background(),
		subjects.Event{Space: "default", Key: "junk-key", Type: "proposal", Sender: "mallory"}.String(), []byte("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	l.get(fmt.Sprintf("/v1/proposals/junk-key/history?min_seq=%d", ack.Sequence), http.StatusOK, &h)
	if len(h.Events) != 1 || h.Events[0].Effect != api.EffectInvalid || h.Events[0].Seq != ack.Sequence {
		t.Fatalf("garbage history %+v", h)
	}
	after := l.post(proposal("p-later", "agent", nil, "m"))
	var p api.Proposal
	l.get(fmt.Sprintf("/v1/proposals/p-later?min_seq=%d", after.Seq), http.StatusOK, &p)
	if p.State != api.StateRejected {
		t.Fatalf("orphan rejection not applied: %+v", p)
	}
}

func TestListFiltersAndPagination(t *testing.T) {
	l := start(t)
	l.post(proposal("p1", "alice", []string{"fs"}, "tools/call"))
	l.post(proposal("p2", "bob", []string{"web"}, "tools/call"))
	l.post(proposal("p3", "alice", []string{"web", "fs"}, "tools/call"))
	l.post(proposal("p4", "carol", nil, "tools/call"))
	l.post(withdraw("w1", "alice", "p1", "busy"))
	l.post(reject("r2", "web", "p2", "policy"))
	l.post(fulfil("f3", "human", "p3", "tools/other")) // fulfillment_mismatch
	l.post(kernel("k1", "agent-sales", "write", "crm_record", "salesforce.com"))
	l.post(kernel("k2", "agent-sales", "read", "github_pr", "github.com"))
	last := l.post(proposal("p5", "alice", []string{"fs"}, "tools/call"))

	ids := func(query string) []string {
		t.Helper()
		var lr api.List
		l.get("/v1/proposals?min_seq="+fmt.Sprint(last.Seq)+"&"+query, http.StatusOK, &lr)
		if lr.NextCursor != "" {
			t.Fatalf("%s: unexpected next_cursor", query)
		}
		out := []string{}
		for _, p := range lr.Proposals {
			out = append(out, p.ID)
		}
		return out
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{"p5", "k2", "k1", "p4", "p3", "p2", "p1"}},
		{"state=pending", []string{"p5", "k2", "k1", "p4"}},
		{"state=withdrawn", []string{"p1"}},
		{"state=rejected", []string{"p2"}},
		{"state=fulfilled", []string{"p3"}},
		{"state=expired", []string{}},
		{"proposer=alice", []string{"p5", "p3", "p1"}},
		{"target=fs", []string{"p5", "p3", "p1"}},
		{"target=web&proposer=alice", []string{"p3"}},
		{"anomaly=fulfillment_mismatch", []string{"p3"}},
		{"proposer=alice&state=pending", []string{"p5"}},
		{"action_type=write", []string{"k1"}},
		{"resource_type=github_pr", []string{"k2"}},
		{"domain=salesforce.com", []string{"k1"}},
		{"space=other", []string{}},
	}
	for _, c := range cases {
		if got := ids(c.query); !slices.Equal(got, c.want) {
			t.Errorf("list %q = %v, want %v", c.query, got, c.want)
		}
	}

	// since/until bound created_at: compare with what the records say.
	var all api.List
	l.get("/v1/proposals", http.StatusOK, &all)
	pivot := all.Proposals[3].CreatedAt // p4
	var wantSince, wantUntil []string
	for _, p := range all.Proposals {
		if !p.CreatedAt.Before(pivot) {
			wantSince = append(wantSince, p.ID)
		} else {
			wantUntil = append(wantUntil, p.ID)
		}
	}
	ts := url.QueryEscape(pivot.Format(time.RFC3339Nano))
	if got := ids("since=" + ts); !slices.Equal(got, wantSince) {
		t.Errorf("since %s = %v, want %v", pivot, got, wantSince)
	}
	if got := ids("until=" + ts); !slices.Equal(got, wantUntil) {
		t.Errorf("until %s = %v, want %v", pivot, got, wantUntil)
	}

	// Pagination: pages of 2 follow the cursor to the same order, once each.
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("cursor does not end")
		}
		var lr api.List
		q := "/v1/proposals?limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		l.get(q, http.StatusOK, &lr)
		if len(lr.Proposals) > 2 {
			t.Fatalf("page of %d", len(lr.Proposals))
		}
		for _, p := range lr.Proposals {
			paged = append(paged, p.ID)
		}
		if lr.NextCursor == "" {
			break
		}
		cursor = lr.NextCursor
		if pages == 0 {
			// A proposal created while paging is newer than any cursor:
			// it does not show up in later pages.
			l.post(proposal("p-new", "dave", nil, "m"))
		}
	}
	if want := []string{"p5", "k2", "k1", "p4", "p3", "p2", "p1"}; !slices.Equal(paged, want) {
		t.Fatalf("paged %v, want %v", paged, want)
	}
}

func TestSpaces(t *testing.T) {
	l := start(t)
	r := l.postTo("team-b", proposal("p1", "alice", nil, "m"))
	l.wantError(http.MethodGet, fmt.Sprintf("/v1/proposals/p1?min_seq=%d", r.Seq), "", nil, 404, "not_found", "id")
	var p api.Proposal
	l.get("/v1/proposals/p1?space=team-b", http.StatusOK, &p)
	if p.Space != "team-b" {
		t.Fatalf("space %q", p.Space)
	}
	var st api.Stats
	l.get("/v1/stats?space=team-b", http.StatusOK, &st)
	if st.Proposals != 1 {
		t.Fatalf("team-b stats %+v", st)
	}
	l.get("/v1/stats", http.StatusOK, &st)
	if st.Proposals != 0 {
		t.Fatalf("default stats %+v", st)
	}
}

// TestStatusReadyzMinSeq runs the API over a real stream and a real store
// with no projector at first, so the lag is exactly what the test
// appended (Projector.Pause takes effect only after the batch in hand, so
// it cannot hold a lag deterministically); then it starts the projector.
func TestStatusReadyzMinSeq(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx := context.Background()
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	appender, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(appender.Close)
	store, err := projections.OpenStore(projections.StoreOptions{Dir: t.TempDir(), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	serve := func(minSeqWait time.Duration) *ledgerT {
		a, err := httpapi.New(httpapi.Options{
			Reader:   store,
			Appender: appender,
			StreamSeq: func(ctx context.Context) (uint64, error) {
				st, err := js.Stream(ctx, subjects.StreamName)
				if err != nil {
					return 0, err
				}
				return st.CachedInfo().State.LastSeq, nil
			},
			ReadyLag:   1,
			MinSeqWait: minSeqWait,
			Logger:     natstest.Logger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(a.Handler())
		t.Cleanup(hs.Close)
		return &ledgerT{t: t, url: hs.URL}
	}
	l := serve(300 * time.Millisecond) // for the reads that must give up
	patient := serve(60 * time.Second) // for the read that must wait

	var h api.Health
	l.get("/healthz", http.StatusOK, &h)
	if h.Status != "ok" {
		t.Fatalf("healthz %+v", h)
	}
	var ready api.Ready
	l.get("/readyz", http.StatusOK, &ready)
	if !ready.Ready || ready.Lag != 0 || ready.Bound != 1 {
		t.Fatalf("readyz %+v", ready)
	}
	l.post(proposal("p1", "a", nil, "m"))
	l.get("/readyz", http.StatusOK, &ready) // lag 1 is within the bound
	if !ready.Ready || ready.Lag != 1 {
		t.Fatalf("readyz at lag 1: %+v", ready)
	}
	l.post(proposal("p2", "a", nil, "m"))
	third := l.post(proposal("p3", "a", nil, "m"))

	var st api.Status
	l.get("/v1/status", http.StatusOK, &st)
	if st.StreamSeq != third.Seq || st.ProjectedSeq != 0 || st.Lag != 3 {
		t.Fatalf("status %+v", st)
	}
	status, _, body := l.do(http.MethodGet, "/readyz", "", nil)
	if err := json.Unmarshal(body, &ready); err != nil || status != 503 || ready.Ready || ready.Lag != 3 || ready.Error == nil || ready.Error.Code != api.CodeNotReady {
		t.Fatalf("readyz while lagging: %d %s", status, body)
	}
	l.wantError(http.MethodGet, fmt.Sprintf("/v1/proposals/p3?min_seq=%d", third.Seq), "", nil, 503, api.CodeNotCaughtUp, "min_seq")
	l.wantError(http.MethodGet, fmt.Sprintf("/v1/proposals?min_seq=%d", third.Seq), "", nil, 503, api.CodeNotCaughtUp, "min_seq")
	l.wantError(http.MethodGet, fmt.Sprintf("/v1/stats?min_seq=%d", third.Seq), "", nil, 503, api.CodeNotCaughtUp, "min_seq")
	// Without min_seq a read answers at once from the projection as it is.
	l.wantError(http.MethodGet, "/v1/proposals/p3", "", nil, 404, "not_found", "id")

	// A read waiting on min_seq is answered once the projector catches up.
	// (Whether the request arrives before or after the projector starts,
	// it must see p3.)
	type res struct {
		status int
		body   []byte
	}
	got := make(chan res, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s/v1/proposals/p3?min_seq=%d", patient.url, third.Seq))
		if err != nil {
			got <- res{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		got <- res{resp.StatusCode, b.Bytes()}
	}()
	proj, err := projector.New(js, store, projector.Options{Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	projDone := make(chan error, 1)
	go func() { projDone <- proj.Run(pctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-projDone; err != nil {
			t.Errorf("projector: %v", err)
		}
	})
	r := <-got
	var p api.Proposal
	if err := json.Unmarshal(r.body, &p); r.status != http.StatusOK || err != nil || p.ID != "p3" {
		t.Fatalf("min_seq read: %d %s", r.status, r.body)
	}
	l.get("/readyz", http.StatusOK, &ready)
	if ready.Lag != 0 {
		t.Fatalf("readyz after catching up: %+v", ready)
	}
}

func TestMetrics(t *testing.T) {
	l := start(t)
	r := l.post(goldenProposal)
	l.wantError(http.MethodPost, "/v1/events", "application/json", []byte("nope"), 400, "not_json", "")
	l.get(fmt.Sprintf("/v1/proposals/env-req-1?min_seq=%d", r.Seq), http.StatusOK, nil)
	status, _, body := l.do(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	text := string(body)
	for _, want := range []string{
		`ledger_events_appended_total{path="http"} 1`,
		`ledger_events_refused_total{code="not_json",path="http"} 1`,
		`ledger_events_folded_total 1`,
		`ledger_projector_lag_events 0`,
		`ledger_stream_seq 1`,
		`ledger_projected_seq 1`,
		`ledger_fold_batch_duration_seconds_count`,
		`ledger_http_request_duration_seconds_count{route="GET /v1/proposals/{id}",status="200"} 1`,
		`ledger_http_request_duration_seconds_count{route="POST /v1/events",status="400"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
