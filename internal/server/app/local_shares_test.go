package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/mcp"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// Local programs have shares of their own in open mode (issue 36): every
// local caller reaches the server from the loopback address, and each
// program is named by its process (connbudget.LocalProcess), whatever
// connections it opens.

const localProgramEnv = "LEDGER_TEST_LOCAL_PROGRAM_URL"

// localMCP sends one MCP request (a new session when session is "").
func localMCP(ctx context.Context, hc *http.Client, base, session, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+mcp.Route, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	return hc.Do(req)
}

// localSession begins an MCP session: its id, or the refusal's status and
// body.
func localSession(ctx context.Context, hc *http.Client, base string) (string, int, string, error) {
	resp, err := localMCP(ctx, hc, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"local","version":"1"}}}`)
	if err != nil {
		return "", 0, "", err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		return "", resp.StatusCode, string(b), nil
	}
	resp, err = localMCP(ctx, hc, base, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return "", 0, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return sid, http.StatusOK, "", nil
}

// localWatch opens a watch of the proposal wait-1: the open body, or the
// refusal's status and body.
func localWatch(ctx context.Context, hc *http.Client, base string) (io.ReadCloser, int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/watch?proposal=wait-1&min_seq=1", nil)
	if err != nil {
		return nil, 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, "", err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, resp.StatusCode, string(b), nil
	}
	return resp.Body, http.StatusOK, "", nil
}

func waitCall(id int, timeout int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait_for_decision","arguments":{"id":"wait-1","timeout_seconds":%d}}}`, id, timeout)
}

// TestLocalProgramA is program A of TestLocalProgramsHaveSeparateShares,
// run in a process of its own (skipped otherwise): it opens MCP sessions
// until refused, two wait_for_decision waits, and watches until refused
// (the waits and the watches share its streams, whichever come first),
// over as many connections as it likes; prints what it holds; and holds
// it until its standard input closes.
func TestLocalProgramA(t *testing.T) {
	base := os.Getenv(localProgramEnv)
	if base == "" {
		t.Skip("program A of TestLocalProgramsHaveSeparateShares")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var sessions []string
	sessionRefusal := ""
	for len(sessions) < 100 {
		sid, code, body, err := localSession(ctx, hc, base)
		if err != nil {
			t.Fatalf("A: session: %v", err)
		}
		if sid == "" {
			sessionRefusal = fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
			break
		}
		sessions = append(sessions, sid)
	}
	if len(sessions) < 2 {
		t.Fatalf("A: %d sessions (%s)", len(sessions), sessionRefusal)
	}
	var held sync.WaitGroup
	for i, sid := range sessions[:2] {
		held.Add(1)
		go func() {
			defer held.Done()
			resp, err := localMCP(ctx, hc, base, sid, waitCall(10+i, 300))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	watches, watchRefusal := 0, ""
	for watches < 100 {
		body, code, msg, err := localWatch(ctx, hc, base)
		if err != nil {
			t.Fatalf("A: watch: %v", err)
		}
		if body == nil {
			watchRefusal = fmt.Sprintf("%d %s", code, strings.TrimSpace(msg))
			break
		}
		defer body.Close()
		watches++
	}
	fmt.Printf("READY sessions=%d watches=%d\nSESSION-REFUSAL %s\nWATCH-REFUSAL %s\n", len(sessions), watches, sessionRefusal, watchRefusal)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test ends
	cancel()
	held.Wait()
}

// TestLocalProgramsHaveSeparateShares: in open mode, program A (another
// process) takes its whole share of streams (watches and MCP waits) and
// of MCP sessions, over as many connections as it likes, and is refused
// beyond it; program B (this process) still gets a watch, an MCP session
// and an answered wait_for_decision.
func TestLocalProgramsHaveSeparateShares(t *testing.T) {
	if os.Getenv(localProgramEnv) != "" {
		t.Skip("inside program A")
	}
	const perClient, sessionsPerCaller = 4, 4
	a := apptest.Start(t, func(o *app.Options) {
		o.MaxConns, o.StreamsPerClient = 64, perClient // 16 streams in all
		o.MCPMaxSessions, o.MCPSessionsPerCaller = 3*sessionsPerCaller, sessionsPerCaller
	})
	base := a.HTTPURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A pending proposal to wait on.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", strings.NewReader(
		`{"protocol":"mew/v0.4","id":"wait-1","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("append: %d", resp.StatusCode)
	}
	for a.Store().AppliedSeq() < 1 {
		if ctx.Err() != nil {
			t.Fatal("the proposal is not folded")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Program A.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestLocalProgramA$", "-test.count=1")
	cmd.Env = append(os.Environ(), localProgramEnv+"="+base)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	var report []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		report = append(report, sc.Text())
		if strings.HasPrefix(sc.Text(), "WATCH-REFUSAL") {
			break
		}
	}
	if len(report) < 3 || !strings.HasPrefix(report[len(report)-3], "READY") {
		t.Fatalf("program A: %q", report)
	}
	t.Logf("program A: %q", report)
	if !strings.Contains(report[len(report)-2], "too_many_sessions") || !strings.Contains(report[len(report)-1], "429") {
		t.Fatalf("program A was not refused at its share: %q", report)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	// A holds its whole share: every stream of its process (its waits and
	// watches, over several connections) and every session.
	procA := "proc:" + strconv.Itoa(cmd.Process.Pid)
	for {
		total, mine := a.Streams().Open(procA)
		if mine == perClient {
			t.Logf("streams: %d open, %d of program A", total, mine)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("program A holds %d streams, want its share %d (the server names it %s)", mine, perClient, procA)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, mine := a.MCPHTTP().Sessions(procA); mine != sessionsPerCaller {
		t.Fatalf("program A holds %d MCP sessions, want its share %d", mine, sessionsPerCaller)
	}

	// Program B is served: a watch, a session, a wait that is answered.
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	body, code, msg, err := localWatch(ctx, hc, base)
	if err != nil || body == nil {
		t.Fatalf("program B's watch: %v %d %s", err, code, msg)
	}
	defer body.Close()
	sid, code, msg, err := localSession(ctx, hc, base)
	if err != nil || sid == "" {
		t.Fatalf("program B's MCP session: %v %d %s", err, code, msg)
	}
	resp, err = localMCP(ctx, hc, base, sid, waitCall(20, 1))
	if err != nil {
		t.Fatalf("program B's wait_for_decision: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "timed_out") || strings.Contains(string(b), "too_many") {
		t.Fatalf("program B's wait_for_decision: %d %s, want the proposal's state at the timeout", resp.StatusCode, b)
	}
	if _, mine := a.Streams().Open(procA); mine != perClient {
		t.Fatalf("program A's streams: %d, want its share %d still held", mine, perClient)
	}
}
