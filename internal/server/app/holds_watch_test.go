package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/mcp"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestWatchersAndWaitsAreHolds (issue 36 item 4): a watch and an MCP
// wait_for_decision are server waits counted against the caller's share
// of waiting requests, as min_seq long polls are. One auditor fills its
// share with MCP waits and watches; its next watch is refused 429
// too_many_holds at once, while another caller's watch and reads are
// served as long as the first caller's holds persist.
func TestWatchersAndWaitsAreHolds(t *testing.T) {
	const perClient = 4
	a := apptest.Start(t, withAuthWriter(t), func(o *app.Options) {
		o.MaxConns, o.MaxHolds, o.HoldsPerClient = 64, 32, perClient
	})
	base := a.HTTPURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A pending proposal to wait on.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", strings.NewReader(
		`{"protocol":"mew/v0.4","id":"wait-1","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+writerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("append: %d", resp.StatusCode)
	}
	for a.Store().AppliedSeq() < 1 { // folded: the waits find it pending
		if ctx.Err() != nil {
			t.Fatal("the proposal is not folded")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// held requests are closed at the end of the test.
	var (
		mu   sync.Mutex
		held []io.Closer
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	watch := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/watch?proposal=wait-1&min_seq=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		mu.Lock()
		held = append(held, resp.Body)
		mu.Unlock()
		return resp.StatusCode, ""
	}

	// The auditor's MCP session and two waits on the pending proposal.
	mcpDo := func(session, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+mcp.Route, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+auditorToken)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		return http.DefaultClient.Do(req)
	}
	resp, err = mcpDo("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"holds","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if resp, err = mcpDo(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const waits = 2
	for i := range waits {
		go func() {
			resp, err := mcpDo(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait_for_decision","arguments":{"id":"wait-1","timeout_seconds":300}}}`, 10+i))
			if err != nil {
				return // the test ended
			}
			mu.Lock()
			held = append(held, resp.Body)
			mu.Unlock()
			_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		}()
	}
	// The waits hold two of the auditor's share.
	for {
		_, mine := a.Holds().Open("token:auditor")
		if mine == waits {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the auditor's MCP waits hold %d, want %d", mine, waits)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Watches take the rest of the share; the next one is refused.
	for i := waits; i < perClient; i++ {
		if code, body := watch(auditorToken); code != http.StatusOK {
			t.Fatalf("the auditor's watch %d: %d %s", i+1, code, body)
		}
	}
	if code, body := watch(auditorToken); code != http.StatusTooManyRequests || !strings.Contains(body, "too_many_holds") {
		t.Fatalf("a watch over the auditor's share: %d %s, want 429 too_many_holds", code, body)
	}
	// Another caller is served while the auditor's holds persist.
	if code, body := watch(opsToken); code != http.StatusOK {
		t.Fatalf("another caller's watch: %d %s", code, body)
	}
	for range 3 {
		probeWithin(t, base, opsToken, 30*time.Second)
	}
	if _, mine := a.Holds().Open("token:auditor"); mine != perClient {
		t.Fatalf("the auditor holds %d, want its share %d still held", mine, perClient)
	}
	// What is held is on /metrics, one series per kind.
	g := heldGauges(t, a)
	if g["holds"] < perClient+1 || g["streams"] < perClient || g["mcp_sessions"] != 1 {
		t.Fatalf("ledger_held: %v, want holds ≥ %d, streams ≥ %d, one MCP session", g, perClient+1, perClient)
	}
}

// heldGauges reads ledger_held{kind}.
func heldGauges(t *testing.T, a *app.App) map[string]float64 {
	t.Helper()
	fams, err := a.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "ledger_held" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// TestMCPOversizeBody: a POST to /mcp over mcp.MaxBody (declared, or sent
// without a length) is answered 413 oversize naming the limit, read by the
// client rather than a reset.
func TestMCPOversizeBody(t *testing.T) {
	a := apptest.Start(t)
	big := strings.Repeat("x", 2*mcp.MaxBody)
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(strings.NewReader(big)) // no length: chunked
		}
		req, _ := http.NewRequest(http.MethodPost, a.HTTPURL()+mcp.Route, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("chunked=%v: %v (want the 413 read)", chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "oversize") || !strings.Contains(string(b), fmt.Sprint(mcp.MaxBody)) {
			t.Fatalf("chunked=%v: %d %s, want 413 oversize naming the limit", chunked, resp.StatusCode, b)
		}
	}
}
