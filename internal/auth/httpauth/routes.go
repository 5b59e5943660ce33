package httpauth

import (
	"fmt"
	"net/http"
)

// Rule says what a route needs. Pattern is a net/http ServeMux pattern
// ("GET /v1/", "POST /v1/events", "/"), matched with ServeMux's own
// precedence (the most specific pattern wins; GET patterns also match HEAD).
type Rule struct {
	Pattern string
	// Open routes need no token.
	Open bool
	// Roles: a token holding any of them may use the route. Ignored when
	// Open.
	Roles []Role
	// Limit applies the per-client write limit.
	Limit bool
	// Spaced routes act on one space (?space=, else the default): a token
	// limited to spaces may use them for its spaces only, and may not use
	// routes that are not Spaced.
	Spaced bool
	// Relay routes act on spaces only through API requests they make
	// with the caller's own token (the MCP endpoint: each tool call is a
	// request to a Spaced route, checked there): a token limited to
	// spaces may use them, and its spaces are enforced on those requests.
	Relay bool
}

// Route patterns of DefaultRules. They follow package api's routes.
const (
	PatternHealth  = "GET /healthz"
	PatternReady   = "GET /readyz"
	PatternMetrics = "GET /metrics"
	PatternOpenAPI = "GET /openapi.json"
	PatternReads   = "GET /v1/"
	PatternEvents  = "POST /v1/events"
	PatternGaps    = "POST /v1/gaps" // a bridge's recording gap (contract §14): recorder
	// PatternBridges is what the ledger knows of each bridge's sessions
	// (contract §14): a read, which a bridge (recorder) makes when it starts.
	PatternBridges = "GET /v1/bridges"
	PatternOpsGet  = "GET /v1/ops/"
	// The whole-log routes of the verifiable log (contract §16): auditor,
	// not per space (a proposal's proof, under GET /v1/proposals/, is).
	PatternCheckpoint    = "GET /v1/checkpoint"
	PatternCheckpointKey = "GET /v1/checkpoint/key"
	PatternCheckpoints   = "GET /v1/checkpoints"
	PatternTiles         = "GET /v1/tile/"
	PatternProofs        = "GET /v1/proof/"
	PatternDefault       = "/"
	// PatternMCP is the MCP endpoint (package internal/server/mcp):
	// auditor, like the reads its tools make.
	PatternMCP = "/mcp"
	// PatternConsole is the web console's static files (package console):
	// open, since they hold no data; the console sends a token to the API.
	PatternConsole = "GET /ui/"
)

// DefaultRules is the ledger's route→role table:
//
//	GET /healthz, GET /readyz   open (probes)
//	GET /openapi.json           open (the API's description)
//	GET /ui/...                 open (the console's files; no data)
//	GET /metrics                open when openMetrics, else metrics or ops
//	GET /v1/...                 auditor (every read, including future ones), per space
//	                            (GET /v1/events?space=* is every space: a token
//	                            limited to spaces is refused it)
//	GET /v1/checkpoint[/key], /v1/checkpoints, /v1/tile/..., /v1/proof/...
//	                            auditor, the whole log: not for a token limited to spaces
//	POST /v1/events             writer, rate limited, per space (recorder: with a
//	                            Ledger-Bridge mark of a bridge it may record, checked by the API)
//	GET /v1/ops/...             ops (read-shaped operations)
//	/mcp                        auditor (the MCP endpoint; its tools' API
//	                            requests carry the caller's token and are
//	                            checked per space on their own routes)
//	POST /v1/gaps               recorder, rate limited, per space (a bridge reports its
//	                            gaps; the API checks the token may record that bridge)
//	GET /v1/bridges             auditor, writer or recorder, per space (a bridge reads how
//	                            its last session ended)
//	anything else               ops (rebuild and every route not named here:
//	                            a new write route is closed until it is listed)
func DefaultRules(openMetrics bool) []Rule {
	metrics := Rule{Pattern: PatternMetrics, Roles: []Role{RoleMetrics, RoleOps}}
	if openMetrics {
		metrics = Rule{Pattern: PatternMetrics, Open: true}
	}
	return []Rule{
		{Pattern: PatternHealth, Open: true},
		{Pattern: PatternReady, Open: true},
		{Pattern: PatternOpenAPI, Open: true},
		{Pattern: PatternConsole, Open: true},
		metrics,
		{Pattern: PatternReads, Roles: []Role{RoleAuditor}, Spaced: true},
		{Pattern: PatternCheckpoint, Roles: []Role{RoleAuditor}},
		{Pattern: PatternCheckpointKey, Roles: []Role{RoleAuditor}},
		{Pattern: PatternCheckpoints, Roles: []Role{RoleAuditor}},
		{Pattern: PatternTiles, Roles: []Role{RoleAuditor}},
		{Pattern: PatternProofs, Roles: []Role{RoleAuditor}},
		{Pattern: PatternEvents, Roles: []Role{RoleWriter, RoleRecorder}, Limit: true, Spaced: true},
		{Pattern: PatternOpsGet, Roles: []Role{RoleOps}},
		{Pattern: PatternMCP, Roles: []Role{RoleAuditor}, Relay: true},
		{Pattern: PatternGaps, Roles: []Role{RoleRecorder}, Limit: true, Spaced: true},
		{Pattern: PatternBridges, Roles: []Role{RoleAuditor, RoleWriter, RoleRecorder}, Spaced: true},
		{Pattern: PatternDefault, Roles: []Role{RoleOps}},
	}
}

// Rules returns DefaultRules with the Guard's OpenMetrics setting.
func (g *Guard) Rules() []Rule { return DefaultRules(g.openMetrics) }

// Protect wraps next with the rules: each request is matched to its rule
// (a request no rule matches needs ops), authenticated and checked as the
// rule says, and rate-limited when the rule has Limit. It returns an error
// for an invalid or conflicting pattern, or a rule with no roles that is
// not open.
func (g *Guard) Protect(rules []Rule, next http.Handler) (http.Handler, error) {
	mux := http.NewServeMux()
	type compiled struct {
		rule  Rule
		inner http.Handler
	}
	idx := make(map[string]*compiled, len(rules))
	for _, r := range rules {
		if !r.Open && len(r.Roles) == 0 {
			return nil, fmt.Errorf("%w: rule %q has no roles and is not open", ErrConfig, r.Pattern)
		}
		c := &compiled{rule: r, inner: next}
		if r.Limit {
			c.inner = g.Limit(next)
		}
		if err := register(mux, r.Pattern); err != nil {
			return nil, err
		}
		idx[r.Pattern] = c
	}
	fallback := &compiled{rule: Rule{Roles: []Role{RoleOps}}, inner: next}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c := fallback
		if _, pattern := mux.Handler(req); pattern != "" {
			if m, ok := idx[pattern]; ok {
				c = m
			}
		}
		if !c.rule.Open {
			if req = g.check(w, req, c.rule.Roles, c.rule.Spaced, c.rule.Relay); req == nil {
				return
			}
		}
		c.inner.ServeHTTP(w, req)
	}), nil
}

// register adds a pattern to the matching mux, turning ServeMux's panics
// (bad or conflicting patterns) into errors.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: route pattern %q: %v", ErrConfig, pattern, p)
		}
	}()
	mux.Handle(pattern, http.NotFoundHandler())
	return nil
}
