package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/mcp"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestMCPSessionsBelongToCaller (issue 36 item 3): an MCP session is its
// creator's. Another token's DELETE of it, or any request naming it, is
// 404 and the session lives on; a made-up session id is 404; one token
// may hold at most mcp.DefaultMaxSessionsPerCaller sessions (429
// too_many_sessions past them) while another token still begins one.
func TestMCPSessionsBelongToCaller(t *testing.T) {
	const scopedToken = "scoped-secret-token"
	g, err := httpauth.New(httpauth.Config{
		Tokens: []httpauth.Token{
			{Name: "auditor", SHA256: httpauth.HashToken(auditorToken), Roles: []httpauth.Role{httpauth.RoleAuditor}},
			{Name: "ops", SHA256: httpauth.HashToken(opsToken), Roles: []httpauth.Role{httpauth.RoleOps, httpauth.RoleAuditor}},
			{Name: "scoped", SHA256: httpauth.HashToken(scopedToken), Roles: []httpauth.Role{httpauth.RoleAuditor}, Spaces: []string{"a"}},
		},
		WriteLimit:   httpauth.RateConfig{PerSecond: -1},
		DefaultSpace: app.DefaultSpace,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.HTTPAuthenticating = true
		o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) { return g.Protect(g.Rules(), next) }
	})
	do := func(method, token, session, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, a.HTTPURL()+mcp.Route, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body, req.ContentLength = http.NoBody, 0
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"siege","version":"1"}}}`
	const ping = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	begin := func(token string) (int, string) {
		t.Helper()
		code, h, body := do(http.MethodPost, token, "", initialize)
		if code == http.StatusOK {
			if id := h.Get("Mcp-Session-Id"); id != "" {
				do(http.MethodPost, token, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				return code, id
			}
			t.Fatalf("initialize: 200 without a session id: %s", body)
		}
		return code, body
	}
	code, sid := begin(auditorToken)
	if code != http.StatusOK {
		t.Fatalf("initialize: %d %s", code, sid)
	}
	if code, _, body := do(http.MethodPost, auditorToken, sid, ping); code != http.StatusOK {
		t.Fatalf("the owner's ping: %d %s", code, body)
	}
	// Another caller: DELETE and a request naming the session are 404.
	if code, _, body := do(http.MethodDelete, scopedToken, sid, ""); code != http.StatusNotFound {
		t.Fatalf("another token's DELETE: %d %s, want 404", code, body)
	}
	if code, _, body := do(http.MethodPost, opsToken, sid, ping); code != http.StatusNotFound {
		t.Fatalf("another token's ping in the session: %d %s, want 404", code, body)
	}
	if code, _, body := do(http.MethodPost, auditorToken, sid, ping); code != http.StatusOK {
		t.Fatalf("the owner's ping after the others: %d %s, want the session alive", code, body)
	}
	// A made-up session id.
	if code, _, body := do(http.MethodPost, auditorToken, "made-up-session-id", ping); code != http.StatusNotFound {
		t.Fatalf("a made-up session id: %d %s, want 404", code, body)
	}
	// The cap per caller; another caller still begins one.
	for i := 1; i < mcp.DefaultMaxSessionsPerCaller; i++ {
		if code, body := begin(auditorToken); code != http.StatusOK {
			t.Fatalf("session %d: %d %s", i+1, code, body)
		}
	}
	if code, body := begin(auditorToken); code != http.StatusTooManyRequests || !strings.Contains(body, "too_many_sessions") {
		t.Fatalf("one session over the cap: %d %s, want 429 too_many_sessions", code, body)
	}
	if code, body := begin(opsToken); code != http.StatusOK {
		t.Fatalf("another caller's session: %d %s", code, body)
	}
	// The owner ends its session: gone for it too.
	if code, _, body := do(http.MethodDelete, auditorToken, sid, ""); code/100 != 2 {
		t.Fatalf("the owner's DELETE: %d %s", code, body)
	}
	if code, _, _ := do(http.MethodPost, auditorToken, sid, ping); code != http.StatusNotFound {
		t.Fatalf("ping after DELETE: %d, want 404", code)
	}
	if code, body := begin(auditorToken); code != http.StatusOK {
		t.Fatalf("a session after one ended: %d %s", code, body)
	}
}
