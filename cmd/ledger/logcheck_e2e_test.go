package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/subjects"
)

// Issue 15, item 2, on a real `ledger serve`: `stream edit --max-age 30s`
// and `stream rm LEDGER` done through the NATS client. The edit is put
// back and logged; the removal makes the ledger not ready with a
// log_problem, online verify fails at once saying why, and a restart
// refuses to recreate the stream empty under the projection.
func TestServeNoticesStreamEditAndRemoval(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	data := filepath.Join(dir, "data")
	s := startServer(t, bin, data, "--log-check-interval", "100ms")
	res, _ := s.publish(0, e2eProposal)
	s.getJSON("env-req-1", res[0].Seq)

	nc, err := nats.Connect(s.addr.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxAge, cfg.Duplicates = 30*time.Second, 30*time.Second
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "max_age put back and logged", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.Config.MaxAge == 0 && strings.Contains(s.logs.String(), "max_age was 30s, put back to 0s")
	})

	if err := js.DeleteStream(ctx, subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "/readyz 503 naming the missing stream", func() bool {
		resp, err := http.Get(s.apiURL + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "stream LEDGER is missing")
	})
	resp, err := http.Get(s.apiURL + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"log_problem":"stream LEDGER is missing`) {
		t.Fatalf("/v1/status without log_problem: %d %s", resp.StatusCode, b)
	}
	t.Logf("/v1/status: %s", b)
	if r := s.cli("", "verify"); r.code == 0 || !strings.Contains(r.stderr, "is missing") {
		t.Fatalf("online verify on a removed stream: exit %d, stderr %s", r.code, r.stderr)
	}
	s.stop()
	code, out := runBin(t, bin, "serve", "--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-format", "json")
	if code == 0 || !strings.Contains(out, "does not recreate it empty") {
		t.Fatalf("restart on a removed stream: exit %d:\n%s", code, out)
	}
}

// waitFor polls cond (every 20ms, for at most a minute).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
	}
}
