package httpauth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// Issue 15, item 7: a token with spaces reads and writes only those (the
// request's ?space=, else the default space) and uses no route that is
// not per space; other tokens are unchanged.
func TestTokenSpaces(t *testing.T) {
	cfg := testConfig()
	cfg.DefaultSpace = "default"
	cfg.Tokens = append(cfg.Tokens, Token{Name: "team-a", SHA256: HashToken("team-a-secret"),
		Roles: []Role{RoleAuditor, RoleWriter, RoleOps}, Spaces: []string{"a", "default"}})
	h := protect(t, cfg)
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/proposals/x?space=a", "team-a-secret", http.StatusOK},
		{"GET", "/v1/proposals/x", "team-a-secret", http.StatusOK}, // the default space
		{"POST", "/v1/events?space=a", "team-a-secret", http.StatusAccepted},
		{"GET", "/v1/proposals/x?space=b", "team-a-secret", http.StatusForbidden},
		{"POST", "/v1/events?space=b", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/stats?space=b", "team-a-secret", http.StatusForbidden},
		{"POST", "/v1/ops/rebuild", "team-a-secret", http.StatusForbidden}, // not per space
		{"GET", "/v1/ops/rebuild", "team-a-secret", http.StatusForbidden},
		// The event log (issue 25): space=* is every space, refused to a
		// token limited to spaces; its own spaces are allowed.
		{"GET", "/v1/events?space=*", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/events/3?space=*", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/events?space=a", "team-a-secret", http.StatusOK},
		{"GET", "/v1/events/3", "team-a-secret", http.StatusOK},
		{"GET", "/v1/events?space=*", tokAuditor, http.StatusOK},
		// The verifiable log: a proposal's proof is per space; the
		// whole-log routes are not (contract §16).
		{"GET", "/v1/proposals/x/proof?space=a", "team-a-secret", http.StatusOK},
		{"GET", "/v1/proposals/x/proof?space=b", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/checkpoint", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/checkpoints", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/tile/0/000", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/tile/entries/000", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/proof/consistency?from=1&to=2", "team-a-secret", http.StatusForbidden},
		{"GET", "/v1/checkpoint", tokAuditor, http.StatusOK},
		{"GET", "/v1/checkpoint/key", tokAuditor, http.StatusOK},
		{"GET", "/v1/tile/0/000", tokAuditor, http.StatusOK},
		{"GET", "/v1/tile/entries/000", tokAuditor, http.StatusOK},
		{"GET", "/v1/proof/consistency?from=1&to=2", tokAuditor, http.StatusOK},
		{"GET", "/v1/proposals/x?space=b", tokAuditor, http.StatusOK}, // no spaces: every space
		{"POST", "/v1/events?space=b", tokWriter, http.StatusAccepted},
		// /mcp relays: a token limited to spaces may use it (its tools'
		// requests are checked per space); it still needs auditor.
		{"POST", "/mcp", "team-a-secret", http.StatusAccepted},
		{"GET", "/mcp?space=b", "team-a-secret", http.StatusOK},
		{"POST", "/mcp", tokAuditor, http.StatusAccepted},
		{"POST", "/mcp", tokWriter, http.StatusForbidden},
		{"DELETE", "/mcp", "", http.StatusUnauthorized},
	} {
		rec := do(h, c.method, c.path, c.token)
		if rec.Code != c.want {
			t.Errorf("%s %s (%s): %d %s, want %d", c.method, c.path, c.token, rec.Code, rec.Body, c.want)
		}
		if c.want == http.StatusForbidden && c.token == "team-a-secret" && !strings.Contains(rec.Body.String(), "team-a") {
			t.Errorf("%s %s: 403 does not name the token: %s", c.method, c.path, rec.Body)
		}
	}
	bad := testConfig()
	bad.Tokens[0].Spaces = []string{""}
	if err := bad.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("empty space: %v", err)
	}
}

// A token's own write limit replaces the shared one for it.
func TestTokenWriteLimit(t *testing.T) {
	cfg := testConfig()
	cfg.WriteLimit = RateConfig{PerSecond: 0.001, Burst: 1}
	cfg.Tokens[1].WriteLimit = &RateConfig{PerSecond: 0.001, Burst: 5} // ci
	cfg.Tokens[3].WriteLimit = &RateConfig{PerSecond: -1}              // gateway: none
	h := protect(t, cfg)
	count := func(token string) int {
		n := 0
		for range 10 {
			if do(h, "POST", "/v1/events", token).Code == http.StatusAccepted {
				n++
			}
		}
		return n
	}
	if n := count(tokWriter); n != 5 {
		t.Errorf("ci (burst 5 of its own): %d of 10 accepted", n)
	}
	if n := count(tokBoth); n != 10 {
		t.Errorf("gateway (no limit of its own): %d of 10 accepted", n)
	}
	cfg.Tokens = append(cfg.Tokens, Token{Name: "other", SHA256: HashToken("other-secret"), Roles: []Role{RoleWriter}})
	h = protect(t, cfg)
	if n := count("other-secret"); n != 1 {
		t.Errorf("other (the shared limit, burst 1): %d of 10 accepted", n)
	}
}
