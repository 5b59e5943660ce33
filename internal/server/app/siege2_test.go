package app_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// The siege tests of issue 36: requests that hold a connection while in
// progress (a declared body never sent, a trickled body, min_seq long
// polls), from one token or none, against probes of another caller that
// must be answered within 2 s.

const writerToken = "writer-secret-token"

// withAuthWriter is withAuth plus a writer token.
func withAuthWriter(t *testing.T) func(*app.Options) {
	t.Helper()
	g, err := httpauth.New(httpauth.Config{
		Tokens: []httpauth.Token{
			{Name: "ops", SHA256: httpauth.HashToken(opsToken), Roles: []httpauth.Role{httpauth.RoleOps, httpauth.RoleAuditor, httpauth.RoleWriter}},
			{Name: "auditor", SHA256: httpauth.HashToken(auditorToken), Roles: []httpauth.Role{httpauth.RoleAuditor}},
			{Name: "writer", SHA256: httpauth.HashToken(writerToken), Roles: []httpauth.Role{httpauth.RoleWriter}},
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

// probeWithin is probe with a bound of d.
func probeWithin(t *testing.T, base, token string, d time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: d, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	// A connection the server closed before reading its request (shed as
	// silent: a client starved for SilentAfter on a loaded machine, see
	// connbudget.SilentAfter) ends in EOF or a reset; a client sends such
	// a request again. At most two such retries: a ledger that sheds every
	// new connection still fails.
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequest(http.MethodGet, base+"/v1/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err = hc.Do(req)
		if err == nil {
			break
		}
		if attempt < 2 && shedBeforeRead(err) {
			t.Logf("probe's connection closed before its request was read (%v); sending it again", err)
			continue
		}
		t.Fatalf("probe not answered within %v: %v", d, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe: status %d", resp.StatusCode)
	}
	t.Logf("probe answered in %v", time.Since(start).Round(time.Millisecond))
}

// shedBeforeRead reports whether err is a request whose connection the
// server closed without an answer (EOF, reset), not a timeout.
func shedBeforeRead(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// holders runs n attackers against addr, each on its own connection:
// it writes head, then trickles one byte of body every 200 ms when
// trickle is set, and reads answers; whenever the server answers or
// closes, it sends head again (on a new connection when closed). It
// returns a stop function, also registered with t.Cleanup.
func holders(t *testing.T, addr string, n int, head string, trickle bool) func() {
	t.Helper()
	p := newAttackerPool(t)
	p.run(n, func() {
		for !p.stopped() {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if !p.hold(c) {
				return
			}
			br := bufio.NewReader(c)
			for !p.stopped() {
				if _, err := io.WriteString(c, head); err != nil {
					break
				}
				answered := make(chan struct{})
				if trickle {
					go func() {
						for {
							select {
							case <-answered:
								return
							case <-time.After(200 * time.Millisecond):
								if _, err := c.Write([]byte{' '}); err != nil {
									return
								}
							}
						}
					}()
				}
				resp, err := http.ReadResponse(br, nil)
				close(answered)
				if err != nil {
					break
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.Close {
					break
				}
			}
			p.release(c)
			p.pause(100 * time.Millisecond) // as the idle siege: reconnect after a pause
		}
	})
	return p.stop
}

// TestInRequestHoldsDoNotLockOut (issue 36 item 2): requests that hold
// their connection inside the request — a declared body never sent (on a
// route that does not read it, and on one that does), a body trickled a
// byte at a time, min_seq long polls — five times the connection cap of
// them, from one token or from none, leave another caller's probe on a
// new connection answered within 2 s, five times; in open mode too.
func TestInRequestHoldsDoNotLockOut(t *testing.T) {
	const maxConns = 64
	declared := func(path, token string) string {
		h := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
		if token != "" {
			h += "Authorization: Bearer " + token + "\r\n"
		}
		return h + "\r\n"
	}
	minSeq := func(token string) string {
		h := "GET /v1/proposals/nope?min_seq=1000000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		if token != "" {
			h += "Authorization: Bearer " + token + "\r\n"
		}
		return h + "\r\n"
	}
	cases := []struct {
		name    string
		auth    bool
		head    string
		trickle bool
	}{
		{"auth/anonymous/healthz-declared-body", true, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n", false},
		{"auth/writer/declared-body", true, declared("/v1/events", writerToken), false},
		{"auth/writer/trickled-body", true, declared("/v1/events", writerToken), true},
		{"auth/auditor/min-seq", true, minSeq(auditorToken), false},
		{"open/healthz-declared-body", false, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n", false},
		{"open/trickled-body", false, declared("/v1/events", ""), true},
		{"open/min-seq", false, minSeq(""), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edits := []func(*app.Options){lockoutTimeouts, func(o *app.Options) { o.MaxConns, o.MinSeqWait = maxConns, 4*probeBound }}
			token := ""
			if tc.auth {
				edits = append(edits, withAuthWriter(t))
				token = opsToken
			}
			a := apptest.Start(t, edits...)
			stop := holders(t, a.HTTPAddr(), 5*maxConns, tc.head, tc.trickle)
			settle(t, a, maxConns)
			for range 5 {
				probeWithin(t, a.HTTPURL(), token, probeBound)
			}
			total, _ := a.Holds().Open("")
			t.Logf("holds: %d (at most %d), refused %d", total, a.Holds().Options().Max, a.Holds().Refused())
			stop()
		})
	}
}
