package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
)

// capture returns the frames of a real MEW capture (testdata/mew-v0.11).
func capture(t *testing.T, name string) (frames [][]byte, mewSpace string) {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "mew-v0.11")
	data, err := os.ReadFile(filepath.Join(dir, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	frames = bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	logData, err := os.ReadFile(filepath.Join(dir, "gateway-logs", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		SpaceID string `json:"space_id"`
	}
	line, _, _ := bytes.Cut(logData, []byte("\n"))
	if err := json.Unmarshal(line, &rec); err != nil || rec.SpaceID == "" {
		t.Fatalf("gateway log of %s: %v", name, err)
	}
	return frames, rec.SpaceID
}

// waitProposal polls the API until a proposal satisfies done (bounded):
// the bridge appends while the test reads, so the last event may not be
// folded yet.
func waitProposal(t *testing.T, cl *apitest.Client, space, id string, done func(*api.Proposal) bool) *api.Proposal {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, _, err := cl.Get(context.Background(), id, apitest.ReadOptions{Space: space})
		if err == nil && done(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in space %s: %+v, %v", id, space, p, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBridgeEndToEnd runs the real binary: `ledger serve
// --bridge-mew-config` recording one MEW space of a stand-in gateway, and
// a standalone `ledger bridge mew --api --http` recording another; each
// replayed capture ends in the state a real MEW run gave; the standalone
// bridge serves /healthz and /metrics and, stopped by SIGTERM, records an
// open gap; the server's bridge records its own when the server stops.
func TestBridgeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	gw := mewgw.Start(map[string][]map[string]any{"rec-token": {}})
	t.Cleanup(gw.Close)
	tokenFile := filepath.Join(dir, "recorder.token")
	if err := os.WriteFile(tokenFile, []byte("rec-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rejectFrames, rejectSpace := capture(t, "c-reject")
	withdrawFrames, withdrawSpace := capture(t, "b-withdraw")
	cfg := filepath.Join(dir, "bridges.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`bridges:
  - mew_space: %s
    gateway: %s
    participant: ledger-recorder
    token_file: recorder.token
    space: served
`, rejectSpace, gw.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, bin, filepath.Join(dir, "data"), "--bridge-mew-config", cfg)
	cl, err := apitest.New(client.Options{API: s.apiURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := gw.WaitJoins(ctx, rejectSpace, "ledger-recorder", 1); err != nil {
		t.Fatalf("%v\n%s", err, s.logs)
	}
	for _, f := range rejectFrames[1:] {
		gw.Broadcast(rejectSpace, f)
	}
	// Rejected, with the rejection's explanation (the capture's last
	// lifecycle envelope).
	waitProposal(t, cl, "served", "bc36e041-9d18-4436-b5a7-8e063d04fa7d", func(p *api.Proposal) bool {
		return p.State == api.StateRejected && len(p.Rejections) == 1 && strings.Contains(p.Rejections[0].Explanation, "destroy the workspace")
	})

	// The standalone bridge.
	cmd := exec.Command(bin, "bridge", "mew", "--gateway", gw.URL(), "--mew-space", withdrawSpace,
		"--participant", "standalone-recorder", "--token-file", tokenFile, "--space", "standalone",
		"--api", s.apiURL, "--http", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	logs := &syncBuffer{}
	httpAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(logs, sc.Text())
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil && l["message"] == "bridge serving /healthz and /metrics" {
				httpAddr <- fmt.Sprint(l["http_addr"])
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var addr string
	select {
	case addr = <-httpAddr:
	case err := <-done:
		t.Fatalf("ledger bridge exited: %v\n%s", err, logs)
	case <-ctx.Done():
		t.Fatalf("no HTTP address\n%s", logs)
	}
	if err := gw.WaitJoins(ctx, withdrawSpace, "standalone-recorder", 1); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	for _, f := range withdrawFrames[1:] {
		gw.Broadcast(withdrawSpace, f)
	}
	waitProposal(t, cl, "standalone", "a0e388ea-18a2-489a-a929-16940bfe6daf", func(p *api.Proposal) bool {
		return p.State == api.StateWithdrawn && p.Withdrawal != nil && strings.Contains(p.Withdrawal.Explanation, "found the file already exists")
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Every frame handled: its welcome and the capture but the observer's.
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := get("/healthz")
		if code == http.StatusOK && strings.Contains(body, `"state":"joined"`) && strings.Contains(body, fmt.Sprintf(`"frames":%d,`, len(withdrawFrames))) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, body := get("/metrics"); !strings.Contains(body, `ledger_bridge_envelopes_total{bridge="standalone-recorder",kind="mcp/proposal",result="appended"} 1`) ||
		!strings.Contains(body, `ledger_bridge_envelopes_total{bridge="standalone-recorder",kind="system/presence",result="skipped"} 6`) {
		t.Errorf("/metrics:\n%s", body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ledger bridge: %v\n%s", err, logs)
	}
	g, err := cl.Gaps(context.Background(), 0, "", apitest.ReadOptions{Space: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Gaps) != 1 || g.Gaps[0].Reason != "bridge stopped" || g.Gaps[0].ReconnectedAt != nil || g.Gaps[0].Bridge != "standalone-recorder" {
		t.Errorf("gaps %+v\n%s", g.Gaps, logs)
	}

	s.stop()
	if !strings.Contains(s.logs.String(), `"message":"gap recorded"`) || !strings.Contains(s.logs.String(), `"reason":"bridge stopped"`) {
		t.Errorf("the server's bridge recorded no gap when the server stopped:\n%s", s.logs)
	}
}
