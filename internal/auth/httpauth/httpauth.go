// Package httpauth protects the ledger's HTTP API (contract §10): bearer tokens
// with roles, a route→role table, a per-client rate limit on writes, a TLS
// configuration helper and a warning for an API exposed without
// authentication. It is plain net/http middleware with no knowledge of the
// API's handlers; package api (or app) wraps its handler with it.
//
// Contract:
//
//   - Tokens are never stored: the configuration holds the hex SHA-256 of
//     each token (HashToken), and a presented token is hashed and compared
//     with every configured hash in constant time, so neither a match nor a
//     near-match shows in the timing.
//   - A request to a protected route without a bearer token, or with one
//     that matches no configured token, is answered 401 with
//     `WWW-Authenticate: Bearer realm="ledger"` (plus error="invalid_token"
//     for an unknown token, RFC 6750). A known token without a role the
//     route needs is answered 403 (error="insufficient_scope"). Bodies are
//     the API's error shape {"error":{"code","message","field"}}, with codes
//     unauthorized, forbidden and rate_limited.
//   - Roles: auditor (reads), writer (POST /v1/events), ops (operations:
//     rebuild and the like, and every route the table does not name),
//     metrics (GET /metrics when it is not open), recorder (a MEW bridge:
//     appends with its Ledger-Bridge mark, POST /v1/gaps, GET /v1/bridges;
//     only for the bridges the token lists, when it lists any). A token
//     may hold several.
//   - /healthz and /readyz are always open; /metrics is open only when
//     Config.OpenMetrics is set.
//   - Writes (routes whose Rule has Limit) are rate limited per client: the
//     token's name when the request carries a known token, else the remote
//     IP. Over the limit: 429 with Retry-After (whole seconds, at least 1).
//   - With no tokens configured the Guard is in open mode: no route needs a
//     token (the single-user default on loopback), and the write limit still
//     applies, keyed by remote IP. Call WarnIfExposed at start-up.
//
// Everything here is safe for concurrent use.
package httpauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/connbudget"
)

// Role is a permission a token holds.
type Role string

// The roles.
const (
	RoleAuditor Role = "auditor" // read routes (GET /v1/...)
	RoleWriter  Role = "writer"  // POST /v1/events
	RoleOps     Role = "ops"     // operations and every route not named in the table
	RoleMetrics Role = "metrics" // GET /metrics when it is protected
	// RoleRecorder records MEW bridges (contract §14): appends carrying a
	// Ledger-Bridge mark and gap reports, for the bridges the token lists
	// (Token.Bridges; none: every bridge), and reads GET /v1/bridges.
	RoleRecorder Role = "recorder"
)

// Roles lists every role, for validation and documentation.
var Roles = []Role{RoleAuditor, RoleWriter, RoleOps, RoleMetrics, RoleRecorder}

// The error codes of the bodies this package writes are api.CodeUnauthorized,
// api.CodeForbidden and api.CodeRateLimited.

// Realm is the realm of the WWW-Authenticate challenge.
const Realm = "ledger"

// ErrConfig is wrapped by every configuration error of this package.
var ErrConfig = errors.New("httpauth: invalid configuration")

// Token is one configured bearer token: a name (for logs and rate
// limiting; never secret), the hex SHA-256 of the token, and its roles.
type Token struct {
	Name   string `yaml:"name" json:"name"`
	SHA256 string `yaml:"sha256" json:"sha256"`
	Roles  []Role `yaml:"roles" json:"roles"`
	// Spaces, if set, are the only spaces the token may read and write
	// (the request's ?space=, else the ledger's default space); such a
	// token may not use the routes that are not per space (operations,
	// metrics). Empty: every space.
	Spaces []string `yaml:"spaces" json:"spaces"`
	// Bridges, if set, are the only bridge participants a recorder token
	// may speak for (Ledger-Bridge marks, gap reports). Empty: every
	// bridge. Only with the recorder role.
	Bridges []string `yaml:"bridges" json:"bridges"`
	// WriteLimit, if set, is this token's own write limit instead of
	// Config.WriteLimit (per_second < 0: none).
	WriteLimit *RateConfig `yaml:"write_limit" json:"write_limit"`
}

// MaxSpaceBytes bounds a space name in Token.Spaces (ledger.MaxSpaceBytes).
const MaxSpaceBytes = 128

// MaxBridgeBytes bounds a bridge name in Token.Bridges (ledger.MaxIDBytes).
const MaxBridgeBytes = 256

// Config is the HTTP part of the ledger's auth configuration.
type Config struct {
	// Tokens are the accepted bearer tokens. None: open mode (see the
	// package documentation).
	Tokens []Token `yaml:"tokens" json:"tokens"`
	// OpenMetrics serves GET /metrics without a token. Otherwise it needs
	// the metrics or ops role.
	OpenMetrics bool `yaml:"open_metrics" json:"open_metrics"`
	// WriteLimit is the per-client rate limit of write routes (a token
	// with its own Token.WriteLimit has that instead).
	WriteLimit RateConfig `yaml:"write_limit" json:"write_limit"`
	// DefaultSpace is the space of a request without ?space= (the
	// ledger's --space), for Token.Spaces. Not read from the file.
	DefaultSpace string `yaml:"-" json:"-"`
}

// HashToken returns the hex SHA-256 of a token: the form Config stores.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Validate checks the configuration and fills defaults (of WriteLimit).
// Errors wrap ErrConfig and name the token.
func (c *Config) Validate() error {
	names := map[string]bool{}
	hashes := map[string]string{}
	for i := range c.Tokens {
		t := &c.Tokens[i]
		where := fmt.Sprintf("http token %d", i+1)
		if t.Name != "" {
			where = fmt.Sprintf("http token %q", t.Name)
		}
		switch {
		case t.Name == "":
			return fmt.Errorf("%w: %s: name is required", ErrConfig, where)
		case strings.ContainsFunc(t.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return fmt.Errorf("%w: %s: name has control characters", ErrConfig, where)
		case names[t.Name]:
			return fmt.Errorf("%w: %s: name used twice", ErrConfig, where)
		}
		names[t.Name] = true
		t.SHA256 = strings.ToLower(strings.TrimSpace(t.SHA256))
		if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("%w: %s: sha256 must be 64 hex digits (the SHA-256 of the token, e.g. printf %%s TOKEN | sha256sum)", ErrConfig, where)
		}
		if other, ok := hashes[t.SHA256]; ok {
			return fmt.Errorf("%w: %s: same token as %q", ErrConfig, where, other)
		}
		hashes[t.SHA256] = t.Name
		if len(t.Roles) == 0 {
			return fmt.Errorf("%w: %s: no roles (want some of %v)", ErrConfig, where, Roles)
		}
		for _, r := range t.Roles {
			if !slices.Contains(Roles, r) {
				return fmt.Errorf("%w: %s: unknown role %q (want some of %v)", ErrConfig, where, r, Roles)
			}
		}
		for _, sp := range t.Spaces {
			if sp == "" || len(sp) > MaxSpaceBytes {
				return fmt.Errorf("%w: %s: space %q must be 1..%d bytes", ErrConfig, where, sp, MaxSpaceBytes)
			}
			if sp == "*" {
				return fmt.Errorf("%w: %s: \"*\" is not a space name: a token reads every space only without spaces (unscoped)", ErrConfig, where)
			}
		}
		if len(t.Bridges) > 0 && !slices.Contains(t.Roles, RoleRecorder) {
			return fmt.Errorf("%w: %s: bridges are given without the %s role", ErrConfig, where, RoleRecorder)
		}
		for _, b := range t.Bridges {
			if b == "" || len(b) > MaxBridgeBytes {
				return fmt.Errorf("%w: %s: bridge %q must be 1..%d bytes", ErrConfig, where, b, MaxBridgeBytes)
			}
		}
		if t.WriteLimit != nil {
			if err := t.WriteLimit.Validate(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return c.WriteLimit.Validate()
}

// Principal is the authenticated caller of a request.
type Principal struct {
	Name   string // the token's name
	Roles  []Role
	Spaces []string // the token's spaces; empty: every space
	// Bridges are the bridges a recorder token may speak for; empty:
	// every bridge (with RoleRecorder).
	Bridges []string
}

// MayRecord reports whether p may speak for bridge: append with its
// Ledger-Bridge mark, report its gaps (RoleRecorder, and bridge among
// p.Bridges when the token lists any).
func (p Principal) MayRecord(bridge string) bool {
	return p.Has(RoleRecorder) && (len(p.Bridges) == 0 || slices.Contains(p.Bridges, bridge))
}

// MaySpace reports whether p may use space.
func (p Principal) MaySpace(space string) bool {
	return len(p.Spaces) == 0 || space != "*" && slices.Contains(p.Spaces, space)
}

// Has reports whether p holds role r.
func (p Principal) Has(r Role) bool { return slices.Contains(p.Roles, r) }

type ctxKey struct{}

// FromContext returns the principal a Guard authenticated for the request
// (false on open routes, in open mode, and outside a Guard).
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// Guard authenticates requests against the configured tokens, enforces
// roles and rate-limits writes.
type Guard struct {
	tokens       []storedToken
	openMetrics  bool
	defaultSpace string
	limiter      *Limiter
	tokenLimits  map[string]*Limiter // tokens with their own WriteLimit
}

type storedToken struct {
	hash    [sha256.Size]byte
	name    string
	roles   []Role
	spaces  []string
	bridges []string
}

// New returns a Guard for cfg (validated here).
func New(cfg Config) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{openMetrics: cfg.OpenMetrics, defaultSpace: cfg.DefaultSpace, tokenLimits: map[string]*Limiter{}}
	for _, t := range cfg.Tokens {
		var st storedToken
		b, _ := hex.DecodeString(t.SHA256) // validated
		copy(st.hash[:], b)
		st.name, st.roles, st.spaces, st.bridges = t.Name, slices.Clone(t.Roles), slices.Clone(t.Spaces), slices.Clone(t.Bridges)
		g.tokens = append(g.tokens, st)
		if t.WriteLimit != nil {
			lim, err := NewLimiter(*t.WriteLimit)
			if err != nil {
				return nil, err
			}
			g.tokenLimits[t.Name] = lim
		}
	}
	lim, err := NewLimiter(cfg.WriteLimit)
	if err != nil {
		return nil, err
	}
	g.limiter = lim
	return g, nil
}

// AuthEnabled reports whether tokens are configured (false: open mode).
func (g *Guard) AuthEnabled() bool { return len(g.tokens) > 0 }

// Authentication failures of Authenticate.
var (
	ErrNoToken      = errors.New("httpauth: no bearer token")
	ErrUnknownToken = errors.New("httpauth: unknown token")
)

// Authenticate returns the principal of r's bearer token. It returns
// ErrNoToken when r has no Authorization: Bearer header and
// ErrUnknownToken when the token matches no configured one.
func (g *Guard) Authenticate(r *http.Request) (Principal, error) {
	tok, ok := bearer(r)
	if !ok {
		return Principal{}, ErrNoToken
	}
	sum := sha256.Sum256([]byte(tok))
	found := -1
	// Compare with every token, without stopping at a match.
	for i := range g.tokens {
		if subtle.ConstantTimeCompare(sum[:], g.tokens[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, ErrUnknownToken
	}
	t := g.tokens[found]
	return Principal{Name: t.name, Roles: slices.Clone(t.roles), Spaces: slices.Clone(t.spaces), Bridges: slices.Clone(t.bridges)}, nil
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" header
// (scheme case-insensitive, RFC 6750 §2.1).
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// check authenticates r for a route needing any of roles and returns the
// request to pass on (with the principal in its context), or writes the
// 401/403 answer and returns nil. A relay route (Rule.Relay) lets a token
// limited to spaces through: the requests it makes are checked.
func (g *Guard) check(w http.ResponseWriter, r *http.Request, roles []Role, spaced, relay bool) *http.Request {
	if !g.AuthEnabled() {
		return r
	}
	p, err := g.Authenticate(r)
	switch {
	case errors.Is(err, ErrNoToken):
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", Realm))
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "a bearer token is required")
		return nil
	case err != nil:
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q, error=\"invalid_token\"", Realm))
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "unknown bearer token")
		return nil
	}
	// A known token: the connection leaves the anonymous budget.
	connbudget.Authenticated(r.Context())
	if len(p.Spaces) > 0 && !relay {
		if !spaced {
			writeError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("token %q is limited to spaces %q: this route is not per space", p.Name, p.Spaces))
			return nil
		}
		space := r.URL.Query().Get("space")
		if space == "" {
			space = g.defaultSpace
		}
		if !p.MaySpace(space) {
			writeError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("token %q may not use space %q (its spaces: %q)", p.Name, space, p.Spaces))
			return nil
		}
	}
	for _, need := range roles {
		if p.Has(need) {
			return r.WithContext(context.WithValue(r.Context(), ctxKey{}, p))
		}
	}
	scope := joinRoles(roles)
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q, error=\"insufficient_scope\", scope=%q", Realm, scope))
	writeError(w, http.StatusForbidden, api.CodeForbidden, fmt.Sprintf("token %q lacks the role this route needs (%s)", p.Name, strings.ReplaceAll(scope, " ", " or ")))
	return nil
}

func joinRoles(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, " ")
}

// Limit wraps next with the Guard's per-client write limit: a token's own
// (Token.WriteLimit) when it has one, else Config.WriteLimit. Put it
// inside Protect, so that the client is the token when there is one.
func (g *Guard) Limit(next http.Handler) http.Handler {
	global := g.limiter.Wrap(next)
	if len(g.tokenLimits) == 0 {
		return global
	}
	own := make(map[string]http.Handler, len(g.tokenLimits))
	for name, l := range g.tokenLimits {
		own[name] = l.Wrap(next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := FromContext(r.Context()); ok {
			if h, ok := own[p.Name]; ok {
				h.ServeHTTP(w, r)
				return
			}
		}
		global.ServeHTTP(w, r)
	})
}

// errorBody is the API's error shape.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}
