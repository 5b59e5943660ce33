package client_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/client"
)

// startLedger runs `ledger serve` (the binary TestMain built) on free
// ports with a fast checkpoint interval and returns its API; extra args are
// appended (e.g. --checkpoint-key). It is stopped by t.Cleanup.
func startLedger(t *testing.T, data string, args ...string) string {
	t.Helper()
	var logs syncBuffer
	cmd := exec.Command(ledgerBin, append([]string{"serve", "--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1",
		"--log-format", "json", "--checkpoint-interval", "20ms"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		var addr struct {
			HTTP string `json:"http"`
		}
		if b, err := os.ReadFile(filepath.Join(data, "serve.addr.json")); err == nil && json.Unmarshal(b, &addr) == nil && addr.HTTP != "" {
			return "http://" + addr.HTTP
		}
		select {
		case err := <-done:
			t.Fatalf("ledger serve exited (%v) before serving:\n%s", err, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger serve not serving after 90s:\n%s", logs.String())
		}
	}
}

// verifierKey asks a ledger for its verifier key.
func verifierKey(t *testing.T, c *client.Client) string {
	t.Helper()
	var key []byte
	if err := c.Do(context.Background(), "GET", "/v1/checkpoint/key", nil, nil, "", false, &key); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(key))
}

// appendAll appends envelopes and waits until the ledger's latest
// checkpoint covers the last one.
func appendAll(t *testing.T, c *client.Client, envs ...string) {
	t.Helper()
	ctx := context.Background()
	var last uint64
	for _, e := range envs {
		ack, err := c.Append(ctx, []byte(e))
		if err != nil {
			t.Fatalf("append %s: %v", e, err)
		}
		last = ack.Seq
	}
	for start := time.Now(); ; {
		var note []byte
		err := c.Do(ctx, "GET", "/v1/checkpoint", nil, nil, "", false, &note)
		if err == nil {
			if cp, err := evidence.ParseUnverified(note); err == nil && cp.Size >= int64(last) {
				return
			}
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("no checkpoint covers seq %d after a minute (%v)", last, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func env(id, method string) string {
	return `{"protocol":"mew/v0.4","id":"` + id + `","from":"agent","to":["fs"],"kind":"mcp/proposal","payload":{"method":"` + method + `"}}`
}

// TestVerifiedGet: a good read is proven and its checkpoint kept (0600);
// a later read accepts a larger checkpoint that extends it; a client
// without WithVerifier, or given a bad key, is refused.
func TestVerifiedGet(t *testing.T) {
	ctx := context.Background()
	plain, err := client.New(ledgerURL, client.WithDefaultSpace("verified"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.VerifiedGet(ctx, "x"); !errors.Is(err, client.ErrOptions) {
		t.Fatalf("VerifiedGet without a verifier: %v", err)
	}
	if _, err := client.New(ledgerURL, client.WithVerifier("not a key", "")); !errors.Is(err, client.ErrOptions) || !errors.Is(err, evidence.ErrKey) {
		t.Fatalf("bad key: %v", err)
	}
	state := filepath.Join(t.TempDir(), "sub", "checkpoint")
	c, err := client.New(ledgerURL, client.WithDefaultSpace("verified"), client.WithVerifier(verifierKey(t, plain), state))
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, c, env("v-1", "tools/call"), `{"protocol":"mew/v0.4","id":"v-1-rej","from":"bot","kind":"mcp/reject","correlation_id":["v-1"],"payload":{"reason":"unsafe"}}`)
	vp, err := c.VerifiedGet(ctx, "v-1")
	if err != nil {
		t.Fatal(err)
	}
	if vp.Proposal.ID != "v-1" || len(vp.History.Events) != 2 || len(vp.Bundle.Events) != 2 || vp.History.Events[1].ID != "v-1-rej" {
		t.Fatalf("verified read: %+v %+v", vp.Proposal, vp.History)
	}
	fi, err := os.Stat(state)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	kept, _ := os.ReadFile(state)
	if string(kept) != vp.Bundle.Checkpoint {
		t.Fatalf("state file holds %q, want the accepted checkpoint %q", kept, vp.Bundle.Checkpoint)
	}
	first := vp.Checkpoint

	appendAll(t, c, env("v-2", "tools/call"))
	// A new client on the same state file continues from the kept tree.
	c2, err := client.New(ledgerURL, client.WithDefaultSpace("verified"), client.WithVerifier(verifierKey(t, plain), state))
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := c2.LastCheckpoint(); err != nil || !ok || cp.String() != first.String() {
		t.Fatalf("LastCheckpoint from the file: %v %v %v, want %v", cp, ok, err, first)
	}
	vp2, err := c2.VerifiedGet(ctx, "v-2")
	if err != nil {
		t.Fatal(err)
	}
	if vp2.Checkpoint.Size <= first.Size {
		t.Fatalf("second read against %v, first %v", vp2.Checkpoint, first)
	}
	if cp, _, _ := c2.LastCheckpoint(); cp.String() != vp2.Checkpoint.String() {
		t.Fatalf("kept %v after accepting %v", cp, vp2.Checkpoint)
	}
}

// TestVerifiedGetForkShrinkRewrite: a second ledger signing with the
// first one's key but holding another history is caught: with fewer
// leaves (ErrShrank), the same number (ErrRewritten, also ErrForked), more
// (ErrForked). The kept checkpoint is not replaced by any of them.
func TestVerifiedGetForkShrinkRewrite(t *testing.T) {
	ctx := context.Background()
	dirA := t.TempDir()
	apiA := startLedger(t, dirA, "--checkpoint-origin", "fork.test/ledger")
	a, err := client.New(apiA)
	if err != nil {
		t.Fatal(err)
	}
	key := verifierKey(t, a)
	state := filepath.Join(t.TempDir(), "checkpoint")
	a, err = client.New(apiA, client.WithVerifier(key, state))
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, a, env("f-1", "read"), env("f-2", "read"), env("f-3", "read"))
	good, err := a.VerifiedGet(ctx, "f-1")
	if err != nil {
		t.Fatal(err)
	}
	if good.Checkpoint.Size != 3 {
		t.Fatalf("checkpoint %v, want 3 leaves", good.Checkpoint)
	}
	kept, _ := os.ReadFile(state)

	// Ledger B: the same signing key, another history.
	keyFile := filepath.Join(t.TempDir(), "stolen.key")
	k, err := os.ReadFile(filepath.Join(dirA, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	apiB := startLedger(t, t.TempDir(), "--checkpoint-key", keyFile)
	b, err := client.New(apiB, client.WithVerifier(key, state))
	if err != nil {
		t.Fatal(err)
	}
	if got := verifierKey(t, b); got != key {
		t.Fatalf("ledger B's key %q, want A's %q", got, key)
	}
	appendAll(t, b, env("f-1", "delete"))
	if _, err := b.VerifiedGet(ctx, "f-1"); !errors.Is(err, evidence.ErrShrank) {
		t.Fatalf("a tree of 1 after one of 3: %v, want ErrShrank", err)
	}
	appendAll(t, b, env("f-2", "delete"), env("f-3", "delete"))
	_, err = b.VerifiedGet(ctx, "f-1")
	if !errors.Is(err, evidence.ErrRewritten) || !errors.Is(err, evidence.ErrForked) {
		t.Fatalf("another tree of 3: %v, want ErrRewritten and ErrForked", err)
	}
	appendAll(t, b, env("f-4", "delete"))
	_, err = b.VerifiedGet(ctx, "f-1")
	if !errors.Is(err, evidence.ErrForked) || errors.Is(err, evidence.ErrRewritten) {
		t.Fatalf("a tree of 4 not extending the kept 3: %v, want ErrForked", err)
	}
	if now, _ := os.ReadFile(state); string(now) != string(kept) {
		t.Fatalf("the kept checkpoint changed after failed reads:\n%s\nwas\n%s", now, kept)
	}
	// The honest ledger still verifies against the kept state.
	if _, err := a.VerifiedGet(ctx, "f-2"); err != nil {
		t.Fatalf("ledger A after B's failures: %v", err)
	}
}

// TestVerifiedGetTampered: a proxy in front of the ledger edits one byte
// of one event of the proof. Edited in the stated bytes only, the read
// fails with ErrMismatch; edited in the leaf as well (its bytes and hash
// recomputed: a rewritten leaf), with ErrInclusion. A proof against
// another key fails with ErrSignature.
func TestVerifiedGetTampered(t *testing.T) {
	ctx := context.Background()
	plain, err := client.New(ledgerURL, client.WithDefaultSpace("tampered"))
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, plain, env("t-1", "tools/call"))
	target, _ := url.Parse(ledgerURL)
	var mode string
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/proof") || r.StatusCode != 200 {
			return nil
		}
		data, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		data = tamper(t, data, mode)
		r.Body = io.NopCloser(strings.NewReader(string(data)))
		r.ContentLength = int64(len(data))
		r.Header.Set("Content-Length", strconv.Itoa(len(data)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		mode string
		want error
	}{{"raw", evidence.ErrMismatch}, {"leaf", evidence.ErrInclusion}, {"", nil}} {
		mode = tc.mode
		c, err := client.New(srv.URL, client.WithDefaultSpace("tampered"), client.WithVerifier(verifierKey(t, plain), ""))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.VerifiedGet(ctx, "t-1")
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Fatalf("tampered %q: %v, want %v", tc.mode, err, tc.want)
		}
	}
	_, otherKey, err := evidence.GenerateKey(nil, "other/ledger")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(ledgerURL, client.WithDefaultSpace("tampered"), client.WithVerifier(otherKey, ""))
	if _, err := c.VerifiedGet(ctx, "t-1"); !errors.Is(err, evidence.ErrSignature) && !errors.Is(err, evidence.ErrOrigin) {
		t.Fatalf("another key: %v, want ErrSignature", err)
	}
}

// tamper changes one byte of the first event's message in a bundle: in
// "raw" mode the stated bytes only, in "leaf" mode the leaf too (with its
// hash recomputed, as someone rewriting the log would).
func tamper(t *testing.T, data []byte, mode string) []byte {
	if mode == "" {
		return data
	}
	b, err := evidence.ParseBundle(data)
	if err != nil {
		t.Errorf("tamper: %v", err)
		return data
	}
	e := &b.Events[0]
	raw := strings.Replace(*e.Raw, "tools/call", "tools/cald", 1)
	e.Raw = &raw
	if mode == "leaf" {
		lb, _ := base64.StdEncoding.DecodeString(e.Leaf)
		l, err := evidence.ParseLeaf(lb)
		if err != nil {
			t.Errorf("tamper: %v", err)
			return data
		}
		l.Data = []byte(raw)
		nb, err := l.MarshalBinary()
		if err != nil {
			t.Errorf("tamper: %v", err)
			return data
		}
		e.Leaf = base64.StdEncoding.EncodeToString(nb)
		e.LeafHash = evidence.LeafHash(nb).String()
	}
	out, err := b.Marshal()
	if err != nil {
		t.Errorf("tamper: %v", err)
		return data
	}
	return out
}
