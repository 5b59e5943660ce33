package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/crashrig"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// proc is a running `ledger bridge mew` process.
type proc struct {
	cmd  *exec.Cmd
	logs *crashrig.Logs
	done chan struct{}
	http string
}

func startBridgeProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{logs: &crashrig.Logs{}, done: make(chan struct{}), http: fmt.Sprintf("127.0.0.1:%d", crashrig.FreePort(t))}
	p.cmd = exec.Command(bin, append([]string{"bridge", "mew", "--log-format", "json", "--quiet", "--http", p.http}, args...)...)
	p.cmd.Env = crashrig.CleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the bridge did not stop:\n%s", p.logs.Tail(4096))
	}
}

// health reads the bridge process's /healthz (zero Health when it does
// not answer).
func (p *proc) health() (int, bridge.Health) {
	resp, err := http.Get("http://" + p.http + "/healthz")
	if err != nil {
		return 0, bridge.Health{}
	}
	defer resp.Body.Close()
	var h bridge.Health
	_ = json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

// TestScenarioGapsCoverEveryLoss: real processes (`ledger serve` with
// its NATS and Pebble, `ledger bridge mew`) and the stand-in gateway.
// During a paced run of proposals the gateway is killed and started
// again on the same port, the bridge is evicted by an impostor, and the
// bridge process is SIGKILLed and started again. Then every proposal the
// ledger lacks lies inside a recorded gap's window (after the gap's last
// envelope, before the first envelope stored from the bridge after the
// gap), nothing is stored twice, and /v1/gaps lists each hole once: the
// restart, the eviction, the killed session, and the clean stop.
func TestScenarioGapsCoverEveryLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the ledger binary")
	}
	dir := t.TempDir()
	bin := crashrig.Build(t, dir, false)
	srv := crashrig.StartServe(t, bin, filepath.Join(dir, "data"))
	cl, err := apitest.New(client.Options{API: srv.API()})
	if err != nil {
		t.Fatal(err)
	}
	const mew, space, token = "scenario", "scenario", "recorder-token"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := map[string][]map[string]any{token: {}}
	gw, err := mewgw.StartOn("127.0.0.1:0", tokens)
	if err != nil {
		t.Fatal(err)
	}
	addr := gw.Addr()
	var gwMu sync.Mutex
	t.Cleanup(func() { gwMu.Lock(); gw.Close(); gwMu.Unlock() })
	args := []string{"--gateway", "ws://" + addr, "--mew-space", mew, "--participant", bridgeName, "--token-file", tokenFile,
		"--space", space, "--api", srv.API(), "--probe-interval", "50ms", "--backoff-max", "1s"}
	b := startBridgeProc(t, bin, args...)
	waitProc := func(what string, p *proc, cond func(int, bridge.Health) bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, h := p.health()
			if cond(code, h) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d %+v\n%s", what, code, h, p.logs.Tail(4096))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	joined := func(code int, h bridge.Health) bool { return code == http.StatusOK && h.State == bridge.StateJoined }
	waitProc("the bridge joined", b, joined)

	// The paced space: proposals p-0, p-1, ... every 2 ms, broadcast to
	// whoever is joined (the gateway may be down: then nobody is).
	const total = 1500
	sent := make([]string, 0, total)
	send := func(n int) {
		for range n {
			id := fmt.Sprintf("p-%d", len(sent))
			gwMu.Lock()
			gw.Broadcast(mew, []byte(`{"protocol":"mew/v0.4","id":"`+id+`","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"x"}}}`))
			gwMu.Unlock()
			sent = append(sent, id)
			time.Sleep(2 * time.Millisecond)
		}
	}
	send(300)

	// 1. The gateway is killed and comes back on the same port.
	gwMu.Lock()
	gw.Close()
	gwMu.Unlock()
	waitProc("503 after the gateway died", b, func(code int, _ bridge.Health) bool { return code == http.StatusServiceUnavailable })
	send(50) // nobody hears these
	gwMu.Lock()
	if gw, err = mewgw.StartOn(addr, tokens); err != nil {
		gwMu.Unlock()
		t.Fatal(err)
	}
	gwMu.Unlock()
	waitProc("the bridge back", b, joined)
	send(300)

	// 2. An impostor joins under the bridge's name: the bridge is evicted
	// and takes its name back.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	imp, err := mewgw.Join(ctx, "ws://"+addr, mew, bridgeName, "someone-else")
	if err != nil {
		t.Fatal(err)
	}
	send(50)
	// The impostor stays: on a real gateway its socket closing would drop
	// the name again (whichever socket of it closes), another hole.
	t.Cleanup(imp.Close)
	waitProc("the eviction noticed", b, func(_ int, h bridge.Health) bool { return h.Gaps >= 2 })
	waitProc("the bridge back", b, joined)
	send(300)

	// 3. The bridge process is killed mid-run and started again.
	b.kill()
	send(100)
	b = startBridgeProc(t, bin, args...)
	waitProc("the new bridge joined", b, joined)
	send(total - len(sent))
	waitProc("the backlog stored", b, func(_ int, h bridge.Health) bool { return h.Backlog == 0 && h.Frames > 0 })
	b.stop(t)

	// The ledger's view.
	ctx = testctx.Whole(t) // 600 reads through a loaded machine
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ro := apitest.ReadOptions{Space: space, MinSeq: st.StreamSeq}
	gaps := gapsOf(t, cl, space)
	seqOf := map[string]uint64{}
	for _, id := range sent {
		p, _, err := cl.Get(ctx, id, ro)
		if err != nil {
			continue
		}
		h, _, err := cl.History(ctx, id, ro)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range h.Events {
			if ev.Type == "proposal" {
				n++
				seqOf[id] = ev.Seq
			}
		}
		if n != 1 || p.State != api.StatePending {
			t.Errorf("%s: %d proposal events, state %s: want one", id, n, p.State)
		}
	}
	pos := map[string]int{}
	for i, id := range sent {
		pos[id] = i
	}
	// A gap's window in the space's order: after its last envelope, up to
	// the first envelope stored after it.
	type window struct{ from, to int }
	var windows []window
	for _, g := range gaps {
		w := window{from: -1, to: len(sent)}
		if g.LastEnvelope != "" {
			w.from = pos[g.LastEnvelope]
			if seqOf[g.LastEnvelope] != g.LastSeq {
				t.Errorf("gap %s: last_seq %d, but %s is at %d", g.ID, g.LastSeq, g.LastEnvelope, seqOf[g.LastEnvelope])
			}
		}
		for i := w.from + 1; i < len(sent); i++ {
			if s, ok := seqOf[sent[i]]; ok && s > g.Seq {
				w.to = i
				break
			}
		}
		windows = append(windows, w)
	}
	missing := 0
	for i, id := range sent {
		if _, ok := seqOf[id]; ok {
			continue
		}
		missing++
		if !slices.ContainsFunc(windows, func(w window) bool { return w.from < i && i < w.to }) {
			t.Errorf("%s (#%d) is missing and inside no gap window %+v", id, i, windows)
		}
	}
	reasons := make([]string, len(gaps))
	for i, g := range gaps {
		reasons[i] = g.Reason
	}
	want := []string{"connection", "evicted", "ended without recording its end", "bridge stopped"}
	if len(gaps) != len(want) {
		t.Fatalf("%d gaps %q, want %d: %q", len(gaps), reasons, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(reasons[i], w) {
			t.Errorf("gap %d: %q, want %q", i, reasons[i], w)
		}
	}
	stats, _, err := cl.Stats(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	if stats.EventsByType["proposal"] != int64(len(seqOf)) || stats.Gaps != int64(len(gaps)) {
		t.Errorf("stats %d proposals, %d gaps; want %d, %d", stats.EventsByType["proposal"], stats.Gaps, len(seqOf), len(gaps))
	}
	t.Logf("%d sent, %d stored, %d missing, all inside %d gaps", len(sent), len(seqOf), missing, len(gaps))
	if missing == 0 {
		t.Error("nothing was lost: the scenario did not test the gaps")
	}
}

// TestScenarioLedgerKilled: a bridge inside `ledger serve`
// (--bridge-mew-config) records a paced run; the whole ledger process is
// SIGKILLed (bridge and ledger die together) and started again. The new
// session learns from the log that the last one did not end cleanly and
// records the gap from its last stored envelope before anything new is
// stored: every proposal the ledger lacks lies inside that window, and
// nothing is stored twice.
func TestScenarioLedgerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the ledger binary")
	}
	dir := t.TempDir()
	bin := crashrig.Build(t, dir, false)
	const mew, space, token = "inside", "inside", "recorder-token"
	gw, err := mewgw.StartOn("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	var gwMu sync.Mutex
	t.Cleanup(func() { gwMu.Lock(); gw.Close(); gwMu.Unlock() })
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "bridges.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("bridges:\n  - mew_space: %s\n    gateway: %s\n    participant: %s\n    token_file: token\n    space: %s\n    probe_interval: 50ms\n    backoff_max: 1s\n",
		mew, gw.URL(), bridgeName, space)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	srv := crashrig.StartServe(t, bin, data, "--bridge-mew-config", cfg)
	// Each wait has its own bound (testctx): one budget for the whole
	// test ran out on a loaded machine, and the reads that ran out were
	// taken for proposals missing.
	if err := gw.WaitJoins(testctx.Context(t), mew, bridgeName, 1); err != nil {
		t.Fatal(err)
	}
	var sent []string
	send := func(n int) {
		for range n {
			id := fmt.Sprintf("q-%d", len(sent))
			gwMu.Lock()
			gw.Broadcast(mew, []byte(`{"protocol":"mew/v0.4","id":"`+id+`","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"x"}}}`))
			gwMu.Unlock()
			sent = append(sent, id)
			time.Sleep(2 * time.Millisecond)
		}
	}
	send(300)
	srv.Kill()
	send(100) // the bridge is gone: nobody records these
	srv = crashrig.StartServe(t, bin, data, "--bridge-mew-config", cfg)
	if err := gw.WaitJoins(testctx.Context(t), mew, bridgeName, 2); err != nil {
		t.Fatal(err)
	}
	send(200)
	cl, err := apitest.New(client.Options{API: srv.API()})
	if err != nil {
		t.Fatal(err)
	}
	// Everything sent after the rejoin is stored (bounded wait).
	last := sent[len(sent)-1]
	ctx := testctx.Context(t)
	deadline := testctx.Deadline(t)
	for {
		st, err := cl.Status(ctx)
		if err == nil {
			if _, _, err := cl.Get(ctx, last, apitest.ReadOptions{Space: space, MinSeq: st.StreamSeq}); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never stored:\n%s", last, srv.Logs.Tail(4096))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx = testctx.Whole(t) // 600 reads through a loaded machine
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ro := apitest.ReadOptions{Space: space, MinSeq: st.StreamSeq}
	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 || !strings.Contains(gaps[0].Reason, "ended without recording its end") || gaps[0].LastEnvelope == "" {
		t.Fatalf("gaps %+v, want the killed session's:\n%s", gaps, srv.Logs.Tail(8192))
	}
	g := gaps[0]
	from := slices.Index(sent, g.LastEnvelope)
	stored, after := 0, -1
	var missing []int
	for i, id := range sent {
		h, _, err := cl.History(ctx, id, ro)
		if errors.Is(err, api.ErrNotFound) {
			missing = append(missing, i)
			continue
		}
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		stored++
		n := 0
		for _, ev := range h.Events {
			if ev.Type == "proposal" {
				n++
				if ev.Seq == g.LastSeq && id != g.LastEnvelope {
					t.Errorf("gap last_seq %d is %s, not %s", g.LastSeq, id, g.LastEnvelope)
				}
				if ev.Seq > g.Seq && after < 0 {
					after = i
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: %d proposal events, want 1", id, n)
		}
		if i > from && after < 0 {
			t.Errorf("%s (#%d) stored inside the window before the gap was recorded", id, i)
		}
	}
	for _, i := range missing {
		if i <= from || i >= after {
			t.Errorf("%s (#%d) is missing outside the gap's window (#%d, #%d)", sent[i], i, from, after)
		}
	}
	if after < 0 || stored == len(sent) {
		t.Errorf("stored %d of %d, first after the gap #%d: the kill lost nothing?", stored, len(sent), after)
	}
	t.Logf("%d sent, %d stored, window (#%d, #%d)", len(sent), stored, from, after)
}
