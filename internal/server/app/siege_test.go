package app_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// The siege tests (contract §10, issue 29 items 1–3): cheap pressure on a
// real ledger on loopback, and a probe that must be answered while it
// lasts. The probe's bound (probeBound) is an outcome (answered or not),
// not a speed: a loaded machine answers within it; a ledger locked out
// does not, because the tests make every timeout that would end the
// lockout by itself (idle, silent, body) longer than the bound
// (lockoutTimeouts).

const (
	opsToken     = "ops-secret-token"
	auditorToken = "auditor-secret-token"
)

// withAuth protects the API with two tokens (ops: every role; auditor).
func withAuth(t *testing.T) func(*app.Options) {
	t.Helper()
	g, err := httpauth.New(httpauth.Config{
		Tokens: []httpauth.Token{
			{Name: "ops", SHA256: httpauth.HashToken(opsToken), Roles: []httpauth.Role{httpauth.RoleOps, httpauth.RoleAuditor, httpauth.RoleWriter}},
			{Name: "auditor", SHA256: httpauth.HashToken(auditorToken), Roles: []httpauth.Role{httpauth.RoleAuditor}},
		},
		WriteLimit:   httpauth.RateConfig{PerSecond: -1},
		DefaultSpace: app.DefaultSpace,
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *app.Options) {
		o.HTTPAuthenticating = true
		o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) { return g.Protect(g.Rules(), next) }
	}
}

// probeBound bounds a probe's answer and a refused request's close.
const probeBound = 30 * time.Second

// lockoutTimeouts makes the server's own timeouts that would end a
// lockout by themselves (a silent connection's header deadline, an idle
// anonymous one's, a body's) four times probeBound: within probeBound
// only the mechanism under test can free a slot.
func lockoutTimeouts(o *app.Options) {
	o.ReadHeaderTimeout, o.AnonIdleTimeout = 4*probeBound, 4*probeBound
	o.BodyIdleTimeout, o.BodyTimeout = 4*probeBound, 4*probeBound
}

// probe sends GET /v1/status on a new connection and fails the test
// unless it is answered 200 within probeBound.
func probe(t *testing.T, base, token string) {
	t.Helper()
	hc := &http.Client{Timeout: probeBound, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, base+"/v1/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("probe not answered within %v: %v", probeBound, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe: status %d", resp.StatusCode)
	}
}

// attackerPool is the bookkeeping of a siege's attackers: the connections
// they hold open (closed by stop), the signal to stop, and the goroutines
// stop waits for. stop is registered with t.Cleanup and safe to call twice.
type attackerPool struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newAttackerPool(t *testing.T) *attackerPool {
	p := &attackerPool{conns: map[net.Conn]bool{}, done: make(chan struct{})}
	t.Cleanup(p.stop)
	return p
}

// run starts n attackers, each running attack until it returns.
func (p *attackerPool) run(n int, attack func()) {
	for range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			attack()
		}()
	}
}

func (p *attackerPool) stopped() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// hold registers c; false (c closed) once the pool is stopping.
func (p *attackerPool) hold(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped() {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

// release forgets c and closes it.
func (p *attackerPool) release(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// pause waits d; false when the pool stopped meanwhile.
func (p *attackerPool) pause(d time.Duration) bool {
	select {
	case <-p.done:
		return false
	case <-time.After(d):
		return true
	}
}

// stop closes every held connection and waits for the attackers.
func (p *attackerPool) stop() {
	p.once.Do(func() {
		p.mu.Lock()
		close(p.done)
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
}

// siege holds n connections to addr open, each reopened (after a pause)
// when the server closes it. hello is written on each new connection
// (empty: nothing). It returns a stop function, also registered with
// t.Cleanup, that closes them all and waits.
func siege(t *testing.T, addr string, n int, hello string) func() {
	t.Helper()
	p := newAttackerPool(t)
	p.run(n, func() {
		for !p.stopped() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err == nil {
				if !p.hold(c) {
					return
				}
				if hello != "" {
					_, _ = io.WriteString(c, hello)
				}
				_, _ = io.Copy(io.Discard, c) // until the server closes it
				p.release(c)
			}
			if !p.pause(100 * time.Millisecond) {
				return
			}
		}
	})
	return p.stop
}

// settle waits until the siege holds at least want connections on the
// server (or 5 s), so that the probes meet the full pressure.
func settle(t *testing.T, a *app.App, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for a.Budget().Stats().Open < want && a.Budget().Evicted() < uint64(want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("open connections: %+v, evicted so far %d", a.Budget().Stats(), a.Budget().Evicted())
}

// TestIdleConnectionsDoNotLockOut: item 1. Connections that send one
// unauthenticated GET /healthz and idle on keep-alive, or that send
// nothing at all (reopened when closed), several times the connection
// cap, leave an ops token's probe answered (probeBound; the idle and
// silent connections' own timeouts are longer); in open mode too.
func TestIdleConnectionsDoNotLockOut(t *testing.T) {
	cases := []struct {
		name     string
		auth     bool
		maxConns int
		hello    string
	}{
		{"auth/healthz-then-idle", true, 64, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
		{"auth/send-nothing", true, 64, ""},
		{"auth/send-nothing/8-conns", true, 8, ""},
		{"open/healthz-then-idle", false, 64, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
		{"open/send-nothing", false, 64, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edits := []func(*app.Options){lockoutTimeouts, func(o *app.Options) { o.MaxConns = tc.maxConns }}
			token := ""
			if tc.auth {
				edits = append(edits, withAuth(t))
				token = opsToken
			}
			a := apptest.Start(t, edits...)
			stop := siege(t, a.HTTPAddr(), 5*tc.maxConns, tc.hello)
			settle(t, a, tc.maxConns)
			for range 5 {
				probe(t, a.HTTPURL(), token)
			}
			stop()
		})
	}
}

// TestRefusedRequestClosesAtOnce: item 2. A request refused before its
// body is read (401 no token, 403 a token without the role, 415 a body
// that is not JSON, 421 a foreign Host), announcing a body it never sends
// (Content-Length: 100, or chunked), is answered and its connection
// closed without waiting for the body (within probeBound; the body's own
// timeouts are longer).
func TestRefusedRequestClosesAtOnce(t *testing.T) {
	authed := apptest.Start(t, withAuth(t), lockoutTimeouts)
	open := apptest.Start(t, lockoutTimeouts)
	cases := []struct {
		name, addr, head string
		status           int
	}{
		{"401/content-length", authed.HTTPAddr(), "POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", 401},
		{"401/chunked", authed.HTTPAddr(), "POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{", 401},
		{"403/auditor-writes", authed.HTTPAddr(), "POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + auditorToken + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", 403},
		{"415/text-plain", open.HTTPAddr(), "POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n", 415},
		{"421/foreign-host", open.HTTPAddr(), "POST /v1/events HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", 421},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.head); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(probeBound))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer within %v: %v", probeBound, err)
			}
			body, err := io.ReadAll(resp.Body) // to the end: the server closed the connection
			if err != nil {
				t.Fatalf("connection not closed within %v of the answer (%d %s): %v", probeBound, resp.StatusCode, body, err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if !resp.Close {
				t.Errorf("answer without Connection: close")
			}
			if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
				t.Fatalf("connection still open after the answer: read %d, %v", n, err)
			}
		})
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestStreamsCapped: item 3. Idle /v1/watch streams, far more than the
// caps, from one auditor token and from unauthenticated clients, are
// refused over the caps (429 too_many_streams, or 401 without a token)
// and leave an ops token's probe answered (probeBound); in open mode the
// cap is per local program (issue 36: one local program cannot take every
// local client's share, however many connections it opens).
func TestStreamsCapped(t *testing.T) {
	for _, auth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			edits := []func(*app.Options){lockoutTimeouts, func(o *app.Options) { o.MaxConns, o.MaxStreams, o.StreamsPerClient = 64, 16, 8 }}
			token := ""
			if auth {
				edits = append(edits, withAuth(t))
				token = opsToken
			}
			a := apptest.Start(t, edits...)
			watchToken := token
			if auth {
				watchToken = auditorToken
			}
			var (
				mu     sync.Mutex
				status = map[int]int{}
				bodies []io.Closer
				wg     sync.WaitGroup
			)
			hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, DisableKeepAlives: true}}
			t.Cleanup(hc.CloseIdleConnections)
			for range 60 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodGet, a.HTTPURL()+"/v1/watch", nil)
					if watchToken != "" {
						req.Header.Set("Authorization", "Bearer "+watchToken)
					}
					// A client retries a connection closed before its
					// request was read (made room for under pressure).
					var resp *http.Response
					var err error
					for try := 0; try < 3; try++ {
						if resp, err = hc.Do(req); err == nil {
							break
						}
					}
					if err != nil {
						t.Errorf("watch: %v", err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					status[resp.StatusCode]++
					if resp.StatusCode == http.StatusOK {
						bodies = append(bodies, resp.Body) // held open, read by no one
					} else {
						_ = resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			t.Cleanup(func() {
				for _, b := range bodies {
					_ = b.Close()
				}
			})
			// With tokens, the token's cap (8); in open mode this
			// program's cap (8, issue 36).
			want := 8
			if status[http.StatusOK] != want || status[http.StatusTooManyRequests] != 60-want {
				t.Fatalf("watch answers %v, want %d streams and %d refused 429", status, want, 60-want)
			}
			if total, _ := a.Streams().Open(""); total != want {
				t.Fatalf("%d streams open, want %d", total, want)
			}
			if auth {
				// Unauthenticated watchers are refused before they count.
				stop := siege(t, a.HTTPAddr(), 100, "GET /v1/watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
				defer stop()
			}
			for range 5 {
				probe(t, a.HTTPURL(), token)
			}
		})
	}
}

// TestBrowsersRefused: item 4, as a client can send it (the browser
// itself is TestCSRFPageInBrowser in internal/console). Open mode: a
// foreign Host is 421 on every route (DNS rebinding), a configured
// --http-host name is served; a write from another origin (Origin,
// Sec-Fetch-Site) is 403; a body that is not JSON or NDJSON is 415; the
// same writes without those headers, or from the server's own origin,
// are stored.
func TestBrowsersRefused(t *testing.T) {
	a := apptest.Start(t, func(o *app.Options) { o.HTTPHosts = []string{"ledger.internal"} })
	base := a.HTTPURL()
	_, port, _ := net.SplitHostPort(a.HTTPAddr())
	env := func(id string) string {
		return `{"protocol":"mew/v0.4","id":"` + id + `","from":"untrusted-agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`
	}
	do := func(method, path, host string, h map[string]string, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	js := map[string]string{"Content-Type": "application/json"}
	with := func(k, v string) map[string]string {
		return map[string]string{"Content-Type": "application/json", k: v}
	}
	refusals := []struct {
		name, method, path, host string
		h                        map[string]string
		body                     string
		status                   int
		code                     string
	}{
		{"rebinding/read", "GET", "/v1/status", "evil.example:" + port, nil, "", 421, "bad_host"},
		{"rebinding/write", "POST", "/v1/events", "evil.example", js, env("h1"), 421, "bad_host"},
		{"text/plain", "POST", "/v1/events", "", map[string]string{"Content-Type": "text/plain"}, env("t1"), 415, "unsupported_media_type"},
		{"form", "POST", "/v1/events", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, env("t2"), 415, "unsupported_media_type"},
		{"multipart", "POST", "/v1/events", "", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, env("t3"), 415, "unsupported_media_type"},
		{"no content type", "POST", "/v1/events", "", nil, env("t4"), 415, "unsupported_media_type"},
		{"cross origin", "POST", "/v1/events", "", with("Origin", "http://127.0.0.1:1"), env("o1"), 403, "cross_origin"},
		{"null origin", "POST", "/v1/events", "", with("Origin", "null"), env("o2"), 403, "cross_origin"},
		{"cross-site", "POST", "/v1/events", "", with("Sec-Fetch-Site", "cross-site"), env("o3"), 403, "cross_origin"},
		{"same-site", "POST", "/v1/events", "", with("Sec-Fetch-Site", "same-site"), env("o4"), 403, "cross_origin"},
		{"rebuild/cross origin", "POST", "/v1/ops/rebuild", "", map[string]string{"Origin": "http://evil.example"}, "", 403, "cross_origin"},
		{"gap/text", "POST", "/v1/gaps", "", map[string]string{"Content-Type": "text/plain"}, `{}`, 415, "unsupported_media_type"},
	}
	for _, r := range refusals {
		st, body := do(r.method, r.path, r.host, r.h, r.body)
		if st != r.status || !strings.Contains(body, `"code":"`+r.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", r.name, st, body, r.status, r.code)
		}
	}
	var st struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	if code, body := do("GET", "/v1/status", "", nil, ""); code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.StreamSeq != 0 {
		t.Fatalf("after the refusals: %d %s, want nothing stored", code, body)
	}
	accepted := []struct {
		name, host string
		h          map[string]string
	}{
		{"plain client", "", js},
		{"ndjson", "", map[string]string{"Content-Type": "application/x-ndjson"}},
		{"same origin", "", with("Origin", base)},
		{"same-origin fetch", "", with("Sec-Fetch-Site", "same-origin")},
		{"localhost", "localhost:" + port, js},
		{"configured name", "ledger.internal:" + port, js},
	}
	for i, r := range accepted {
		if code, body := do("POST", "/v1/events", r.host, r.h, env(fmt.Sprintf("ok-%d", i))); code != http.StatusAccepted && code != http.StatusOK {
			t.Errorf("%s: %d %s, want it stored", r.name, code, body)
		}
	}
}
