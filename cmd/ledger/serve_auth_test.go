package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/server/app"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// TestServeAuth runs the ledger with deploy/auth's worked example: the
// embedded server gets its users and permissions, the ledger connects as
// its service user, and the API wants bearer tokens with roles.
func TestServeAuth(t *testing.T) {
	const example = "../../deploy/auth/ledger-auth.yaml"
	token, err := os.ReadFile("../../deploy/auth/example-secrets/audit-team.token")
	if err != nil {
		t.Fatal(err)
	}
	o := apptest.Options(t)
	if err := applyAuth(&o, example, "", "", limitFlags{}, natstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	a := apptest.StartWith(t, o)

	get := func(path, bearer string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, a.HTTPURL()+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/v1/status", ""); got != http.StatusUnauthorized {
		t.Errorf("status without a token: %d", got)
	}
	if got := get("/v1/status", strings.TrimSpace(string(token))); got != http.StatusOK {
		t.Errorf("status with the auditor's token: %d", got)
	}
	if got := get("/healthz", ""); got != http.StatusOK {
		t.Errorf("healthz: %d", got)
	}
	req, _ := http.NewRequest(http.MethodPost, a.HTTPURL()+"/v1/events", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST with an auditor's token: %d, want 403", resp.StatusCode)
	}
	// NATS: no anonymous clients.
	if nc, err := nats.Connect(a.NATSURL()); err == nil {
		nc.Close()
		t.Errorf("anonymous NATS connection accepted")
	}
	if err := applyAuth(&o, "", "cert.pem", "", limitFlags{}, natstest.Logger(t)); err == nil {
		t.Errorf("--tls-cert without --tls-key accepted")
	}
}

// Issue 15, item 7: a non-loopback NATS listener without authentication
// is said loudly; loopback, or authorization in --nats-config, is not.
func TestWarnIfNATSExposed(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("authorization { user: a, password: b }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		listen, conf string
		urls         []string
		want         bool
	}{
		{"0.0.0.0:4222", "", nil, true},
		{"192.0.2.1:4222", "", nil, true},
		{"127.0.0.1:4222", "", nil, false},
		{"localhost:4222", "", nil, false},
		{"0.0.0.0:4222", conf, nil, false},
		{"0.0.0.0:4222", "", []string{"nats://elsewhere:4222"}, false},
	} {
		var logs strings.Builder
		log := zerolog.New(&logs)
		got := warnIfNATSExposed(app.Options{NATSListen: c.listen, NATSConfigFile: c.conf, NATSURLs: c.urls}, log)
		if got != c.want || (got && !strings.Contains(logs.String(), `"level":"error"`)) {
			t.Errorf("%s conf=%q urls=%v: warned %v (%s), want %v", c.listen, c.conf, c.urls, got, logs.String(), c.want)
		}
	}
}

// Issue 15, item 7: without --auth every local client has the loopback
// address, so a write limit would be one budget shared by all of them:
// it is off unless --write-rate asks for one.
func TestNoWriteLimitWithoutAuth(t *testing.T) {
	o := apptest.Options(t)
	if err := applyAuth(&o, "", "", "", limitFlags{}, natstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	a := apptest.StartWith(t, o)
	for i := range 150 { // over the default burst of 100
		body := strings.NewReader(strings.Replace(`{"protocol":"mew/v0.4","id":"ID","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, "ID", "p"+strconv.Itoa(i), 1))
		resp, err := http.Post(a.HTTPURL()+"/v1/events", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("write %d: 429 without --auth and without --write-rate", i+1)
		}
	}
}

// Issue 15, item 6: authentication comes before the body is read: a
// request without a token whose body never comes is answered 401 at
// once, not held waiting for the body.
func TestAuthBeforeBody(t *testing.T) {
	o := apptest.Options(t)
	o.BodyIdleTimeout = time.Hour    // only authentication can answer in time
	o.HTTPHosts = []string{"ledger"} // the corpus's Host
	if err := applyAuth(&o, "../../deploy/auth/ledger-auth.yaml", "", "", limitFlags{}, natstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	a := apptest.StartWith(t, o)
	c, err := net.Dial("tcp", a.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(hostileHTTP(t, "http-body-never-comes.http")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to an unauthenticated request whose body never comes: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
}
