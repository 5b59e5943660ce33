package httpauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/rs/zerolog"
)

const (
	tokAuditor = "audit-secret-1"
	tokWriter  = "writer-secret-2"
	tokOps     = "ops-secret-3"
	tokBoth    = "both-secret-4"
	tokMetrics = "prom-secret-5"
)

func testConfig() Config {
	return Config{
		Tokens: []Token{
			{Name: "audit-team", SHA256: HashToken(tokAuditor), Roles: []Role{RoleAuditor}},
			{Name: "ci", SHA256: HashToken(tokWriter), Roles: []Role{RoleWriter}},
			{Name: "oncall", SHA256: strings.ToUpper(HashToken(tokOps)), Roles: []Role{RoleOps}},
			{Name: "gateway", SHA256: HashToken(tokBoth), Roles: []Role{RoleAuditor, RoleWriter}},
			{Name: "prometheus", SHA256: HashToken(tokMetrics), Roles: []Role{RoleMetrics}},
		},
		WriteLimit: RateConfig{PerSecond: -1},
	}
}

// backend answers like the API would: 202 for a POST, 200 otherwise, and
// echoes the principal's name.
func backend() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := FromContext(r.Context())
		w.Header().Set("X-Principal", p.Name)
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

func protect(t *testing.T, cfg Config) http.Handler {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := g.Protect(g.Rules(), backend())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestProtectStatusCodes(t *testing.T) {
	h := protect(t, testConfig())
	cases := []struct {
		method, path, token string
		want                int
		who                 string // principal seen by the backend
		challenge           string // substring of WWW-Authenticate
	}{
		{"GET", "/healthz", "", 200, "", ""},
		{"GET", "/readyz", "", 200, "", ""},
		{"GET", "/healthz", "not-a-token", 200, "", ""}, // open: a bad token does not matter
		{"GET", "/v1/proposals/p1", "", 401, "", `Bearer realm="ledger"`},
		{"GET", "/v1/proposals/p1", "wrong", 401, "", `error="invalid_token"`},
		{"GET", "/v1/proposals/p1", tokWriter, 403, "", `error="insufficient_scope", scope="auditor"`},
		{"GET", "/v1/proposals/p1", tokAuditor, 200, "audit-team", ""},
		{"HEAD", "/v1/stats", tokAuditor, 200, "audit-team", ""},
		{"GET", "/v1/proposals?state=pending", tokBoth, 200, "gateway", ""},
		{"GET", "/v1/status", tokOps, 403, "", "insufficient_scope"},
		{"POST", "/v1/events", "", 401, "", "Bearer"},
		{"POST", "/v1/events", tokAuditor, 403, "", `scope="writer recorder"`},
		{"POST", "/v1/events", tokWriter, 202, "ci", ""},
		{"POST", "/v1/events?space=s", tokBoth, 202, "gateway", ""},
		{"GET", "/metrics", "", 401, "", "Bearer"},
		{"GET", "/metrics", tokAuditor, 403, "", `scope="metrics ops"`},
		{"GET", "/metrics", tokMetrics, 200, "prometheus", ""},
		{"GET", "/metrics", tokOps, 200, "oncall", ""},
		// Routes the table does not name need ops.
		{"POST", "/v1/rebuild", tokWriter, 403, "", `scope="ops"`},
		{"POST", "/v1/rebuild", tokOps, 202, "oncall", ""},
		{"DELETE", "/v1/events", tokWriter, 403, "", "insufficient_scope"},
		{"GET", "/v1/ops/at", tokAuditor, 403, "", "insufficient_scope"},
		{"GET", "/v1/ops/at", tokOps, 200, "oncall", ""},
		{"GET", "/v1/checkpoint", tokWriter, 403, "", `scope="auditor"`},
		{"GET", "/v1/checkpoint", "", 401, "", "Bearer"},
		{"GET", "/v1/tile/0/000.p/3", tokAuditor, 200, "audit-team", ""},
		{"GET", "/nowhere", "", 401, "", "Bearer"},
	}
	for _, c := range cases {
		rec := do(h, c.method, c.path, c.token)
		name := c.method + " " + c.path + " token=" + c.token
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d (body %s)", name, rec.Code, c.want, rec.Body)
			continue
		}
		if got := rec.Header().Get("X-Principal"); got != c.who {
			t.Errorf("%s: principal %q, want %q", name, got, c.who)
		}
		wa := rec.Header().Get("WWW-Authenticate")
		if c.challenge != "" && !strings.Contains(wa, c.challenge) {
			t.Errorf("%s: WWW-Authenticate %q, want it to contain %q", name, wa, c.challenge)
		}
		if c.want == 401 || c.want == 403 {
			var b errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
				t.Errorf("%s: body %q: %v", name, rec.Body, err)
			} else if want := map[int]string{401: api.CodeUnauthorized, 403: api.CodeForbidden}[c.want]; b.Error.Code != want {
				t.Errorf("%s: code %q, want %q", name, b.Error.Code, want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s: content type %q", name, ct)
			}
		}
	}
}

func TestBearerParsing(t *testing.T) {
	h := protect(t, testConfig())
	for hdr, want := range map[string]int{
		"Bearer " + tokAuditor:          200,
		"bearer " + tokAuditor:          200,
		"BEARER   " + tokAuditor + "  ": 200,
		"Basic " + tokAuditor:           401,
		tokAuditor:                      401,
		"Bearer":                        401,
		"Bearer ":                       401,
	} {
		req := httptest.NewRequest("GET", "/v1/stats", nil)
		req.Header.Set("Authorization", hdr)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Authorization %q: %d, want %d", hdr, rec.Code, want)
		}
	}
}

func TestOpenMetricsAndOpenMode(t *testing.T) {
	cfg := testConfig()
	cfg.OpenMetrics = true
	h := protect(t, cfg)
	if rec := do(h, "GET", "/metrics", ""); rec.Code != 200 {
		t.Fatalf("open metrics: %d", rec.Code)
	}
	if rec := do(h, "GET", "/v1/stats", ""); rec.Code != 401 {
		t.Fatalf("reads still protected: %d", rec.Code)
	}

	// No tokens: open mode, every route passes, nobody is authenticated.
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g.AuthEnabled() {
		t.Fatal("AuthEnabled with no tokens")
	}
	open, err := g.Protect(g.Rules(), backend())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"GET", "/v1/stats"}, {"POST", "/v1/events"}, {"POST", "/v1/rebuild"}, {"GET", "/metrics"}} {
		if rec := do(open, r[0], r[1], ""); rec.Code >= 400 {
			t.Errorf("open mode %s %s: %d", r[0], r[1], rec.Code)
		}
	}
}

func TestRequired(t *testing.T) {
	g, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := g.Required(backend(), RoleOps, RoleWriter)
	for tok, want := range map[string]int{"": 401, "nope": 401, tokAuditor: 403, tokOps: 200, tokWriter: 200} {
		if rec := do(h, "GET", "/anything", tok); rec.Code != want {
			t.Errorf("token %q: %d, want %d", tok, rec.Code, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Required with no roles did not panic")
		}
	}()
	g.Required(backend())
}

func TestConfigValidate(t *testing.T) {
	h := HashToken("x")
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"no name":      {Config{Tokens: []Token{{SHA256: h, Roles: []Role{RoleOps}}}}, "name is required"},
		"dup name":     {Config{Tokens: []Token{{Name: "a", SHA256: h, Roles: []Role{RoleOps}}, {Name: "a", SHA256: HashToken("y"), Roles: []Role{RoleOps}}}}, "name used twice"},
		"bad hash":     {Config{Tokens: []Token{{Name: "a", SHA256: "plaintext-token", Roles: []Role{RoleOps}}}}, "64 hex digits"},
		"short hash":   {Config{Tokens: []Token{{Name: "a", SHA256: h[:60], Roles: []Role{RoleOps}}}}, "64 hex digits"},
		"same token":   {Config{Tokens: []Token{{Name: "a", SHA256: h, Roles: []Role{RoleOps}}, {Name: "b", SHA256: h, Roles: []Role{RoleOps}}}}, `same token as "a"`},
		"no roles":     {Config{Tokens: []Token{{Name: "a", SHA256: h}}}, "no roles"},
		"unknown role": {Config{Tokens: []Token{{Name: "a", SHA256: h, Roles: []Role{"admin"}}}}, `unknown role "admin"`},
		"burst":        {Config{WriteLimit: RateConfig{PerSecond: 5, Burst: -1}}, "burst"},
	}
	for name, c := range cases {
		err := c.cfg.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrConfig containing %q", name, err, c.want)
		}
	}
	ok := testConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if ok.Tokens[2].SHA256 != HashToken(tokOps) {
		t.Error("sha256 not normalised to lower case")
	}
	def := Config{}
	if err := def.Validate(); err != nil || def.WriteLimit.PerSecond != DefaultWritesPerSecond || def.WriteLimit.Burst != DefaultWriteBurst {
		t.Errorf("defaults: %v %+v", err, def.WriteLimit)
	}
}

func TestProtectBadRules(t *testing.T) {
	g, _ := New(Config{})
	if _, err := g.Protect([]Rule{{Pattern: "/x"}}, backend()); !errors.Is(err, ErrConfig) {
		t.Errorf("rule without roles: %v", err)
	}
	if _, err := g.Protect([]Rule{{Pattern: "GET /v1/", Open: true}, {Pattern: "/v1/ops/", Open: true}}, backend()); !errors.Is(err, ErrConfig) {
		t.Errorf("conflicting patterns: %v", err)
	}
	if _, err := g.Protect([]Rule{{Pattern: "BAD PATTERN X", Open: true}}, backend()); !errors.Is(err, ErrConfig) {
		t.Errorf("bad pattern: %v", err)
	}
}

// fakeClock drives a Limiter's time.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func withClock(l *Limiter, c *fakeClock) { l.now = c.now }

func TestRateLimitWrites(t *testing.T) {
	cfg := testConfig()
	cfg.WriteLimit = RateConfig{PerSecond: 0.5, Burst: 3}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	withClock(g.limiter, clk)
	h, err := g.Protect(g.Rules(), backend())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if rec := do(h, "POST", "/v1/events", tokWriter); rec.Code != 202 {
			t.Fatalf("write %d: %d", i, rec.Code)
		}
	}
	rec := do(h, "POST", "/v1/events", tokWriter)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("4th write: %d, want 429", rec.Code)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After %q, want 2 (one token at 0.5/s)", ra)
	}
	var b errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Code != api.CodeRateLimited {
		t.Errorf("429 body %s (%v)", rec.Body, err)
	}
	// Another client (token) has its own budget; reads are not limited.
	if rec := do(h, "POST", "/v1/events", tokBoth); rec.Code != 202 {
		t.Errorf("other token: %d", rec.Code)
	}
	for range 10 {
		if rec := do(h, "GET", "/v1/stats", tokAuditor); rec.Code != 200 {
			t.Fatalf("read limited: %d", rec.Code)
		}
	}
	// A refused request does not use budget: after 2s one write passes.
	clk.add(1999 * time.Millisecond)
	if rec := do(h, "POST", "/v1/events", tokWriter); rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("before refill: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	clk.add(time.Millisecond)
	if rec := do(h, "POST", "/v1/events", tokWriter); rec.Code != 202 {
		t.Errorf("after refill: %d", rec.Code)
	}
	// An unauthenticated request is rejected before it could use budget.
	if rec := do(h, "POST", "/v1/events", ""); rec.Code != 401 {
		t.Errorf("no token: %d", rec.Code)
	}
}

func TestRateLimitByIPInOpenMode(t *testing.T) {
	g, err := New(Config{WriteLimit: RateConfig{PerSecond: 1, Burst: 1}})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	withClock(g.limiter, clk)
	h, _ := g.Protect(g.Rules(), backend())
	post := func(addr string) int {
		req := httptest.NewRequest("POST", "/v1/events", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if post("10.0.0.1:1000") != 202 || post("10.0.0.1:2000") != 429 {
		t.Fatal("same IP, other port: not limited together")
	}
	if post("10.0.0.2:1000") != 202 || post("[::1]:5") != 202 {
		t.Fatal("other IPs limited")
	}
}

func TestRateLimitMaxClients(t *testing.T) {
	l, err := NewLimiter(RateConfig{PerSecond: 1, Burst: 1, MaxClients: 2})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	withClock(l, clk)
	for _, k := range []string{"a", "b"} {
		if ok, _ := l.Allow(k); !ok {
			t.Fatalf("%s refused", k)
		}
	}
	if ok, wait := l.Allow("c"); ok || wait <= 0 {
		t.Fatalf("third client while two are active: ok=%v wait=%v", ok, wait)
	}
	clk.add(time.Second) // a and b are full again: forgotten on demand
	if ok, _ := l.Allow("c"); !ok {
		t.Fatal("third client refused after the others went idle")
	}
	if n := l.Clients(); n != 1 {
		t.Fatalf("clients tracked = %d, want 1", n)
	}
	off, _ := NewLimiter(RateConfig{PerSecond: -1})
	for range 100 {
		if ok, _ := off.Allow("x"); !ok {
			t.Fatal("limit off refused")
		}
	}
}

func TestIsLoopbackAndWarnings(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:80": true, "[::1]:8080": true, "localhost:8080": true, "LOCALHOST:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.1.2.3:8080": false, "ledger.example:443": false,
		"127.0.0.1": true,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	if WarnIfExposed("127.0.0.1:8080", false, log) || WarnIfExposed("0.0.0.0:8080", true, log) || buf.Len() != 0 {
		t.Fatalf("warned needlessly: %s", buf.String())
	}
	if !WarnIfExposed(":8080", false, log) || !strings.Contains(buf.String(), `"level":"warn"`) || !strings.Contains(buf.String(), `"addr":":8080"`) {
		t.Fatalf("no warning for :8080 without auth: %s", buf.String())
	}
	buf.Reset()
	if WarnIfCleartext("0.0.0.0:8080", true, true, log) || WarnIfCleartext("127.0.0.1:1", true, false, log) || WarnIfCleartext(":1", false, false, log) {
		t.Fatal("cleartext warning needlessly")
	}
	if !WarnIfCleartext(":8443", true, false, log) || buf.Len() == 0 {
		t.Fatal("no cleartext warning")
	}
}

// selfSigned writes a certificate and key for 127.0.0.1 and returns their
// paths and a pool trusting the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "ledger-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSConfig(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	for name, args := range map[string][2]string{
		"none": {"", ""}, "no key": {certFile, ""}, "no cert": {"", keyFile},
		"missing": {certFile + ".nope", keyFile}, "swapped": {keyFile, certFile},
	} {
		if _, err := TLSConfig(args[0], args[1]); !errors.Is(err, ErrTLS) {
			t.Errorf("%s: err = %v, want ErrTLS", name, err)
		}
	}
	cfg, err := TLSConfig(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Fatalf("MinVersion %x", cfg.MinVersion)
	}
	g, _ := New(testConfig())
	h, _ := g.Protect(g.Rules(), backend())
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused TLS 1.1 handshake
	srv.StartTLS()
	defer srv.Close()

	get := func(maxVer uint16, token string) (int, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: maxVer, MinVersion: tls.VersionTLS10},
		}}
		req, _ := http.NewRequest("GET", srv.URL+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(tls.VersionTLS12, tokAuditor); err != nil || code != 200 {
		t.Fatalf("TLS 1.2 read: %d %v", code, err)
	}
	if code, err := get(0, "bad"); err != nil || code != 401 {
		t.Fatalf("TLS 1.3 bad token: %d %v", code, err)
	}
	if _, err := get(tls.VersionTLS11, tokAuditor); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	}
}

func TestAuthenticatePicksTheRightToken(t *testing.T) {
	var cfg Config
	for i := range 50 {
		tok := strings.Repeat("t", i+1)
		cfg.Tokens = append(cfg.Tokens, Token{Name: tok, SHA256: HashToken(tok), Roles: []Role{RoleAuditor}})
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		req := httptest.NewRequest("GET", "/", nil)
		tok := strings.Repeat("t", i+1)
		req.Header.Set("Authorization", "Bearer "+tok)
		p, err := g.Authenticate(req)
		if err != nil || p.Name != tok {
			t.Fatalf("token %d: %+v %v", i, p, err)
		}
	}
}
