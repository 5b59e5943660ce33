package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

const (
	authExample = "../../deploy/auth/ledger-auth.yaml"
	secrets     = "../../deploy/auth/example-secrets/"
)

func secret(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(secrets + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// runCLIToken runs the CLI in-process with LEDGER_TOKEN set to token ("":
// unset).
func runCLIToken(t *testing.T, token, stdin string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("LEDGER_TOKEN", token)
	return runCLI(t, stdin, args...)
}

// TestCLIWithAuthAndLimits runs a ledger with deploy/auth's worked example
// and the limit flags, and drives it through the CLI and HTTP: tokens and
// roles (401, 403), NATS credentials (a gateway's password, an auditor's
// nkey), the to limit, the write rate limit (429 with Retry-After), bare
// kernel proposals with publish --kernel (the README's dual approval), and
// the online rebuild and verify, which need the ops role.
func TestCLIWithAuthAndLimits(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_DATA", "LEDGER_NATS_URL", "LEDGER_SPACE", "LEDGER_NATS_USER", "LEDGER_NATS_PASSWORD_FILE", "LEDGER_NATS_NKEY"} {
		t.Setenv(v, "")
	}
	o := apptest.Options(t)
	authFile, gatewayPassword := quickAuth(t)
	if err := applyAuth(&o, authFile, "", "", limitFlags{maxTo: 2, writeRate: 20, writeBurst: 20}, natstest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	lim, err := limitFlags{maxTo: 2}.submitLimits()
	if err != nil {
		t.Fatal(err)
	}
	o.Limits = lim
	a := apptest.StartWith(t, o)
	apiURL := a.HTTPURL()
	audit, writer, ops := secret(t, "audit-team.token"), secret(t, "ci-writer.token"), secret(t, "oncall.token")

	// Tokens and roles.
	if code, _, stderr := runCLIToken(t, "", "", "stats", "--api", apiURL); code != exitFailed || !strings.Contains(stderr, "unauthorized") || !strings.Contains(stderr, "LEDGER_TOKEN") {
		t.Errorf("stats without a token: %d %s", code, stderr)
	}
	if code, _, stderr := runCLIToken(t, "", "", "stats", "--api", apiURL, "--token", "not-a-token"); code != exitFailed || !strings.Contains(stderr, "unauthorized") {
		t.Errorf("stats with an unknown token: %d %s", code, stderr)
	}
	if code, _, stderr := runCLIToken(t, audit, "", "stats", "--api", apiURL); code != exitOK {
		t.Errorf("stats with the auditor's token: %d %s", code, stderr)
	}
	props, _ := os.ReadFile("../../examples/kernel-proposals.jsonl")
	if code, _, stderr := runCLIToken(t, audit, string(props), "publish", "--kernel", "--api", apiURL); code != exitFailed || !strings.Contains(stderr, "forbidden") {
		t.Errorf("publish with the auditor's token: %d %s", code, stderr)
	}

	// publish --kernel, approvals and fulfilments (the README's walkthrough).
	code, stdout, stderr := runCLIToken(t, writer, string(props), "publish", "--kernel", "--api", apiURL)
	if code != exitOK || !strings.Contains(stdout, `"id":"pay-inv-9001"`) {
		t.Fatalf("publish --kernel: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLIToken(t, writer, "", "publish", "-f", "../../examples/kernel-approvals.jsonl", "--api", apiURL)
	if code != exitOK {
		t.Fatalf("publish approvals: %d %s %s", code, stdout, stderr)
	}
	last := lastSeq(t, stdout)
	code, stdout, stderr = runCLIToken(t, audit, "", "get", "pay-inv-9001", "-o", "json", "--min-seq", strconv.FormatUint(last, 10), "--api", apiURL)
	var p api.Proposal
	if code != exitOK || json.Unmarshal([]byte(stdout), &p) != nil || p.State != api.StateFulfilled || p.Approved == nil || !*p.Approved || len(p.Anomalies) != 0 {
		t.Fatalf("get pay-inv-9001: %d %s %s", code, stdout, stderr)
	}
	code, stdout, _ = runCLIToken(t, audit, "", "get", "pay-inv-9002", "-o", "json", "--api", apiURL)
	if code != exitOK || json.Unmarshal([]byte(stdout), &p) != nil || !p.HasAnomaly(api.AnomalyUnapprovedFulfillment) {
		t.Fatalf("get pay-inv-9002: %d %s", code, stdout)
	}
	bad, _ := os.ReadFile("../../examples/kernel-bad.jsonl")
	code, _, stderr = runCLIToken(t, writer, string(bad), "publish", "--kernel", "--api", apiURL)
	if code != exitFailed || !strings.Contains(stderr, "line 1: V-PROP-004") || !strings.Contains(stderr, "line 2: V-PROP-014") {
		t.Errorf("publish --kernel of bad proposals: %d %s", code, stderr)
	}

	// The to limit (--max-to 2).
	tooMany := `{"protocol":"mew/v0.4","id":"to-3","from":"a","to":["b","c","d"],"kind":"mcp/proposal","payload":{"method":"m","params":{}}}`
	code, stdout, stderr = runCLIToken(t, writer, tooMany+"\n", "publish", "--api", apiURL)
	if code != exitFailed || !strings.Contains(stdout, `"code":"too_many"`) || !strings.Contains(stderr, "(field to)") {
		t.Errorf("publish with 3 to entries: %d %s %s", code, stdout, stderr)
	}

	// NATS credentials: a gateway's password for the submit service; an
	// auditor's nkey for export. Without credentials: no connection.
	nurl := a.NATSURL()
	code, stdout, stderr = runCLI(t, string(props), "publish", "--kernel", "--space", "research", "--nats-url", nurl,
		"--nats-user", "gateway", "--nats-password-file", gatewayPassword)
	if code != exitOK || strings.Count(stdout, `"seq":`) != 2 {
		t.Errorf("publish --kernel through the submit service as the gateway: %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, string(props), "publish", "--nats-url", nurl); code != exitUsage {
		t.Errorf("publish through NATS without credentials: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "publish", "--nats-url", nurl, "--nats-password-file", gatewayPassword); code != exitUsage || !strings.Contains(stderr, "--nats-user") {
		t.Errorf("a password without a user: %d %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "export.jsonl")
	code, _, stderr = runCLI(t, "", "export", "--progress", "off", "--nats-url", nurl, "--nats-user", "audit", "--nats-nkey", secrets+"audit.nk", "-f", out)
	if code != exitOK || !strings.Contains(stderr, "exported") {
		t.Errorf("export as the auditor: %d %s", code, stderr)
	}

	// The write rate limit: 429 with Retry-After. ci-writer has its own
	// write_limit in the example (200/s, burst 400), which wins over
	// --write-rate. Writes from 32 clients at once until one is refused:
	// a count sent one by one (600 did) can stay under 200/s on a loaded
	// machine and never meet the limit; this stops at the first 429,
	// bounded by the test's context.
	var (
		limitedOnce sync.Once
		limitedResp = make(chan *http.Response, 1)
		wctx        = testctx.Context(t)
		sendWG      sync.WaitGroup
	)
	stop, cancelWrites := context.WithCancel(wctx)
	for range 32 {
		sendWG.Add(1)
		go func() {
			defer sendWG.Done()
			for stop.Err() == nil {
				req, _ := http.NewRequestWithContext(stop, http.MethodPost, apiURL+"/v1/events", strings.NewReader(`{}`))
				req.Header.Set("Authorization", "Bearer "+writer)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				if resp.StatusCode == http.StatusTooManyRequests {
					first := false
					limitedOnce.Do(func() { first = true; limitedResp <- resp; cancelWrites() })
					if !first {
						resp.Body.Close()
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	sendWG.Wait()
	cancelWrites()
	select {
	case resp := <-limitedResp:
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || eb.Error == nil || eb.Error.Code != api.CodeRateLimited {
			t.Errorf("429: Retry-After %q, body %+v", resp.Header.Get("Retry-After"), eb.Error)
		}
	default:
		t.Errorf("writes over ci-writer's own write_limit (200/s, burst 400) from 32 clients: never 429 (%v)", wctx.Err())
	}

	// Online ops need the ops role.
	if code, _, stderr := runCLIToken(t, audit, "", "rebuild", "--api", apiURL, "--progress", "off"); code != exitFailed || !strings.Contains(stderr, "forbidden") {
		t.Errorf("rebuild with the auditor's token: %d %s", code, stderr)
	}
	time.Sleep(time.Second) // the write budget refills
	code, stdout, stderr = runCLIToken(t, ops, "", "rebuild", "--api", apiURL, "--progress", "off", "--log-level", "warn")
	if code != exitOK || !strings.Contains(stdout, "online up to seq") {
		t.Fatalf("rebuild --api: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLIToken(t, "", "", "verify", "--api", apiURL, "--token", ops, "--progress", "off")
	var vr api.VerifyResult
	if code != exitOK || json.Unmarshal([]byte(stdout), &vr) != nil || !vr.OK || vr.Seq < last {
		t.Fatalf("verify --api: %d %s %s", code, stdout, stderr)
	}
}

// quickAuth writes deploy/auth's example with the gateway's password
// hashed at bcrypt's lowest cost, and returns it and the password's file:
// the example's cost 11 takes seconds per connection under the race
// detector on a busy machine, longer than a client waits.
func quickAuth(t *testing.T) (string, string) {
	t.Helper()
	doc, err := os.ReadFile(authExample)
	if err != nil {
		t.Fatal(err)
	}
	pw := secret(t, "gateway.password")
	fast, err := authcfg.HashPassword(pw, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's hash is the one following "user: gateway".
	text := string(doc)
	i := strings.Index(text, "user: gateway")
	j := i + strings.Index(text[i:], `password: "`) + len(`password: "`)
	k := j + strings.Index(text[j:], `"`)
	if i < 0 || j < i || k < j {
		t.Fatal("no gateway password in the example")
	}
	text = text[:j] + fast + text[k:]
	abs, err := filepath.Abs(filepath.Dir(authExample))
	if err != nil {
		t.Fatal(err)
	}
	text = strings.ReplaceAll(text, "seed_file: example-secrets/", "seed_file: "+abs+"/example-secrets/")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.password"), []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ledger-auth.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, filepath.Join(dir, "gateway.password")
}

// lastSeq is the largest "seq" of publish's result lines.
func lastSeq(t *testing.T, out string) uint64 {
	t.Helper()
	var last uint64
	dec := json.NewDecoder(bytes.NewReader([]byte(out)))
	for dec.More() {
		var r api.AppendResult
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		last = max(last, r.Seq)
	}
	return last
}

// TestRebuildAndVerifyFollowServe: with no --api and no --data flag, a
// running serve's data directory is found through LEDGER_DATA (its address
// file) and the commands go online.
func TestRebuildAndVerifyFollowServe(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_NATS_URL", "LEDGER_TOKEN"} {
		t.Setenv(v, "")
	}
	a := apptest.Start(t)
	t.Setenv("LEDGER_DATA", a.Options().DataDir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Appender().Append(ctx, "", []byte(`{"protocol":"mew/v0.4","id":"p-1","from":"a","kind":"mcp/proposal","payload":{"method":"m","params":{}}}`)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "", "rebuild", "--progress", "off", "--log-level", "warn")
	if code != exitOK || !strings.Contains(stdout, "online up to seq 1") {
		t.Fatalf("rebuild: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "", "verify", "--progress", "off")
	if code != exitOK || !strings.Contains(stdout, `"ok": true`) {
		t.Fatalf("verify: %d %s %s", code, stdout, stderr)
	}
}
