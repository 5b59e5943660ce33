package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/subjects"
)

// The end-to-end test builds the real binary, runs `ledger serve` as a
// process on free ports in a temporary directory, and drives it only
// through the CLI and HTTP.

const (
	e2eProposal = `{"protocol":"mew/v0.4","id":"env-req-1","ts":"2026-01-02T03:04:05Z","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"notes.txt","content":"hello"}}}}`
	e2eFulfil   = `{"protocol":"mew/v0.4","id":"env-fulfill-1","from":"human-user","to":["target-agent"],"kind":"mcp/request","correlation_id":["env-req-1"],"payload":{"jsonrpc":"2.0","id":789,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"notes.txt","content":"hello"}}}}`
	e2eResponse = `{"protocol":"mew/v0.4","id":"env-resp-1","from":"target-agent","to":["human-user"],"kind":"mcp/response","correlation_id":["env-fulfill-1"],"payload":{"jsonrpc":"2.0","id":789,"result":{"content":[{"type":"text","text":"wrote 5 bytes"}]}}}`
)

// buildBinary builds cmd/ledger into dir (with -race when the test runs
// with it, so the build cache is shared).
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "ledger")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, ".")
	goTool := "go"
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "bin", "go"); fileExists(p) {
			goTool = p
		}
	}
	cmd := exec.Command(goTool, args...)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the environment without LEDGER_* variables, so the test's
// flags are the only configuration.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

// syncBuffer is a bytes.Buffer safe for a process writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is a running `ledger serve` process.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	logs   *syncBuffer
	done   chan struct{}
	err    error
	addr   api.Addr
	apiURL string
	bin    string
}

func startServer(t *testing.T, bin, data string, args ...string) *server {
	t.Helper()
	addrFile := filepath.Join(data, "serve.addr.json")
	if _, err := os.Stat(addrFile); err == nil {
		t.Fatalf("%s exists before start: a stale address file", addrFile)
	}
	s := &server{t: t, logs: &syncBuffer{}, done: make(chan struct{}), bin: bin}
	s.cmd = exec.Command(bin, append([]string{"serve", "--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	s.cmd.Env = cleanEnv()
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	// serve.addr.json appears once everything serves.
	deadline := time.Now().Add(90 * time.Second)
	for {
		data, err := os.ReadFile(addrFile)
		if err == nil && json.Unmarshal(data, &s.addr) == nil && s.addr.HTTP != "" {
			break
		}
		select {
		case <-s.done:
			t.Fatalf("ledger serve exited (%v) before serving:\n%s", s.err, s.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 90s:\n%s", addrFile, s.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.apiURL = "http://" + s.addr.HTTP
	if !strings.HasPrefix(s.addr.NATS, "nats://127.0.0.1:") {
		t.Fatalf("addr file nats %q", s.addr.NATS)
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("ledger serve still running 60s after SIGTERM:\n%s", s.logs)
	}
	if s.err != nil {
		s.t.Fatalf("ledger serve exited with %v:\n%s", s.err, s.logs)
	}
}

// result is one CLI run.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary with args (and stdin) against the server's API.
func (s *server) cli(stdin string, args ...string) result {
	s.t.Helper()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(cleanEnv(), "LEDGER_API="+s.apiURL)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("run ledger %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// ok runs the CLI and requires exit status 0.
func (s *server) ok(stdin string, args ...string) string {
	s.t.Helper()
	r := s.cli(stdin, args...)
	if r.code != 0 {
		s.t.Fatalf("ledger %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// publish runs `ledger publish` with lines on stdin and returns the
// results.
func (s *server) publish(wantCode int, lines ...string) ([]api.AppendResult, string) {
	s.t.Helper()
	r := s.cli(strings.Join(lines, "\n")+"\n", "publish")
	if r.code != wantCode {
		s.t.Fatalf("publish: exit %d, want %d\nstdout: %s\nstderr: %s", r.code, wantCode, r.stdout, r.stderr)
	}
	var out []api.AppendResult
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var res api.AppendResult
		if err := dec.Decode(&res); err != nil {
			s.t.Fatalf("publish output %q: %v", r.stdout, err)
		}
		out = append(out, res)
	}
	return out, r.stderr
}

func (s *server) getJSON(id string, minSeq uint64) (api.Proposal, string) {
	s.t.Helper()
	raw := s.ok("", "get", id, "-o", "json", "--min-seq", fmt.Sprint(minSeq))
	var p api.Proposal
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		s.t.Fatalf("get -o json: %v in %s", err, raw)
	}
	return p, raw
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	data := filepath.Join(dir, "data")
	s := startServer(t, bin, data)

	// The golden sequence through the CLI.
	res, _ := s.publish(0, e2eProposal, e2eFulfil, e2eResponse)
	if len(res) != 3 || res[0].Line != 1 || res[2].Line != 3 || res[2].Seq != 3 {
		t.Fatalf("golden publish results %+v", res)
	}
	p, goldenJSON := s.getJSON("env-req-1", res[2].Seq)
	if p.State != api.StateFulfilled || p.DecidedBy != "human-user" || len(p.Fulfillments) != 1 || p.Fulfillments[0].Outcome != "succeeded" {
		t.Fatalf("golden proposal %+v", p)
	}
	table := s.ok("", "get", "env-req-1")
	for _, want := range []string{"State", "fulfilled", "human-user", "succeeded"} {
		if !strings.Contains(table, want) {
			t.Errorf("get table lacks %q:\n%s", want, table)
		}
	}
	hist := s.ok("", "history", "env-req-1")
	if strings.Count(hist, "applied") != 3 || !strings.Contains(hist, "env-resp-1") {
		t.Errorf("history table:\n%s", hist)
	}

	// A withdrawal with its explanation, and a rejection with its
	// explanation (read-your-writes with --min-seq right after each
	// publish).
	res, _ = s.publish(0,
		`{"protocol":"mew/v0.4","id":"prop-w","from":"agent-a","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"delete_file"}}}`,
		`{"protocol":"mew/v0.4","id":"withdraw-1","from":"agent-a","kind":"mcp/withdraw","correlation_id":["prop-w"],"payload":{"reason":"no_longer_needed"}}`,
		`{"protocol":"mew/v0.4","id":"chat-w","from":"agent-a","kind":"chat","correlation_id":["withdraw-1"],"payload":{"text":"found the file elsewhere"}}`)
	p, _ = s.getJSON("prop-w", res[2].Seq)
	if p.State != api.StateWithdrawn || p.Withdrawal == nil || p.Withdrawal.Explanation != "found the file elsewhere" {
		t.Fatalf("withdrawn %+v", p)
	}
	res, _ = s.publish(0,
		`{"protocol":"mew/v0.4","id":"prop-r","from":"agent-a","to":["fs-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/etc/passwd"}}}}`,
		`{"protocol":"mew/v0.4","id":"reject-789","from":"fs-agent","kind":"mcp/reject","correlation_id":["prop-r"],"payload":{"reason":"unsafe"}}`,
		`{"protocol":"mew/v0.4","id":"chat-r","from":"fs-agent","kind":"chat","correlation_id":["reject-789"],"payload":{"text":"outside the sandbox"}}`)
	p, _ = s.getJSON("prop-r", res[2].Seq)
	if p.State != api.StateRejected || len(p.Rejections) != 1 || p.Rejections[0].Explanation != "outside the sandbox" {
		t.Fatalf("rejected %+v", p)
	}

	// Bad input through the CLI: exit 1, the refusals on stderr with their
	// line numbers, the good line stored.
	res, stderr := s.publish(1,
		`{"protocol":"mew/v0.4","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`,
		`{"protocol":"mew/v0.4","id":"prop-ok","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`,
		`not json`,
		`{"protocol":"mew/v0.4","id":"x","from":"a","kind":"mcp/withdraw","payload":{}}`)
	if len(res) != 4 || res[0].Error == nil || res[1].Error != nil || res[2].Error == nil || res[3].Error == nil {
		t.Fatalf("mixed publish %+v", res)
	}
	for _, want := range []string{
		"line 1: missing_field: ", "(field id)",
		"line 3: not_json: ",
		"line 4: missing_correlation: ", "(field correlation_id)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("publish stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "line 2") {
		t.Errorf("publish stderr mentions the good line:\n%s", stderr)
	}

	// Bad input over HTTP: 400 with the field.
	resp, err := http.Post(s.apiURL+"/v1/events", "application/json", strings.NewReader(`{"protocol":"mew/v0.4","id":"y","from":"a","kind":"mcp/proposal","to":"b","payload":{"method":"m"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb api.ErrorBody
	if resp.StatusCode != 400 || json.Unmarshal(body, &eb) != nil || eb.Error == nil || eb.Error.Code != "wrong_type" || eb.Error.Field != "to" {
		t.Fatalf("HTTP refusal: %d %s", resp.StatusCode, body)
	}

	// Through the submit service over NATS.
	r := s.cli(`{"protocol":"mew/v0.4","id":"prop-nats","from":"agent-n","kind":"mcp/proposal","payload":{"method":"m"}}`+"\n", "publish", "--nats-url", s.addr.NATS)
	if r.code != 0 || !strings.Contains(r.stdout, `"id":"prop-nats"`) {
		t.Fatalf("publish --nats-url: %+v", r)
	}
	var nres api.AppendResult
	if err := json.Unmarshal([]byte(r.stdout), &nres); err != nil {
		t.Fatal(err)
	}
	lastSeq := nres.Seq
	if p, _ = s.getJSON("prop-nats", lastSeq); p.Proposer != "agent-n" {
		t.Fatalf("proposal via NATS %+v", p)
	}

	// A plain NATS client publishing straight onto the subject that
	// `ledger subject` names, with its Nats-Msg-Id: the ledger's own
	// path then recognises the same envelope as a duplicate (same digest).
	direct := `{"protocol":"mew/v0.4","id":"prop-direct","from":"agent d","kind":"mcp/proposal","payload":{"method":"m"}}`
	var target struct {
		Subject string `json:"subject"`
		MsgID   string `json:"msg_id"`
	}
	if err := json.Unmarshal([]byte(s.ok(direct, "subject", "-o", "json")), &target); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.addr.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), target.Subject, []byte(direct), jetstream.WithMsgID(target.MsgID))
	if err != nil {
		t.Fatalf("direct publish on %s: %v", target.Subject, err)
	}
	res, _ = s.publish(0, direct)
	if !res[0].Duplicate || res[0].Seq != ack.Sequence {
		t.Fatalf("the ledger's path after a direct publish: %+v, want a duplicate of seq %d", res[0], ack.Sequence)
	}
	// Garbage straight onto a ledger subject: kept, shown as invalid.
	junk := subjects.Event{Space: "default", Key: "junk-key", Type: "proposal", Sender: "mallory"}.String()
	ack, err = js.Publish(t.Context(), junk, []byte("{garbage"))
	if err != nil {
		t.Fatal(err)
	}
	var h api.History
	if err := json.Unmarshal([]byte(s.ok("", "history", "junk-key", "-o", "json", "--min-seq", fmt.Sprint(ack.Sequence))), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 || h.Events[0].Effect != api.EffectInvalid {
		t.Fatalf("garbage history %+v", h)
	}
	lastSeq = ack.Sequence
	// ledger events: the garbage found by its effect, and its bytes raw.
	var evp api.EventPage
	if err := json.Unmarshal([]byte(s.ok("", "events", "--effect", "invalid", "--from", "mallory", "-o", "json", "--min-seq", fmt.Sprint(ack.Sequence))), &evp); err != nil {
		t.Fatal(err)
	}
	if len(evp.Events) != 1 || evp.Events[0].Seq != ack.Sequence || evp.Events[0].Code != "not_json" {
		t.Fatalf("ledger events --effect invalid: %+v", evp)
	}
	if out := s.ok("", "events", "--effect", "invalid", "--from", "mallory"); !strings.Contains(out, "junk-key") || !strings.Contains(out, "not_json") {
		t.Fatalf("ledger events table:\n%s", out)
	}
	if out := s.ok("", "events", fmt.Sprint(ack.Sequence)); !strings.Contains(out, "subject  "+junk) || !strings.HasSuffix(out, "\n{garbage\n") {
		t.Fatalf("ledger events SEQ:\n%s", out)
	}

	// Lists and stats.
	var lst api.List
	if err := json.Unmarshal([]byte(s.ok("", "list", "--state", "withdrawn", "-o", "json", "--min-seq", fmt.Sprint(lastSeq))), &lst); err != nil {
		t.Fatal(err)
	}
	if len(lst.Proposals) != 1 || lst.Proposals[0].ID != "prop-w" {
		t.Fatalf("list withdrawn %+v", lst)
	}
	if out := s.ok("", "list", "--all", "--limit", "2"); strings.Count(out, "\n") != 7 { // header + 6 proposals
		t.Errorf("list --all:\n%s", out)
	}
	statsBefore := s.ok("", "stats", "-o", "json")
	var st api.Stats
	if err := json.Unmarshal([]byte(statsBefore), &st); err != nil || st.Proposals != 6 || st.ByState["fulfilled"] != 1 ||
		st.ByState["withdrawn"] != 1 || st.ByState["rejected"] != 1 || st.RejectionReasons["unsafe"] != 1 {
		t.Fatalf("stats %s (%v)", statsBefore, err)
	}

	// Not found and unreachable: exit 1 and 2, with clear messages.
	if r := s.cli("", "get", "no-such-proposal"); r.code != 1 || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("get missing: %+v", r)
	}
	if r := s.cli("", "get", "env-req-1", "--api", "http://127.0.0.1:1"); r.code != 2 ||
		!strings.Contains(r.stderr, "cannot reach the ledger at http://127.0.0.1:1: is `ledger serve` running?") {
		t.Errorf("get unreachable: %+v", r)
	}
	if r := s.cli("", "list", "--state", "nope"); r.code != 1 || !strings.Contains(r.stderr, "(field state)") {
		t.Errorf("list bad state: %+v", r)
	}

	// SIGTERM: a clean shutdown that removes the address file.
	s.stop()
	if _, err := os.Stat(filepath.Join(data, "serve.addr.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("address file after shutdown: %v", err)
	}
	if logs := s.logs.String(); !strings.Contains(logs, `"message":"ledger stopped"`) || !strings.Contains(logs, `"http_addr":"`+s.addr.HTTP+`"`) {
		t.Errorf("serve logs lack start/stop lines:\n%s", logs)
	}

	// Restart on the same data: the same answers.
	s2 := startServer(t, bin, data)
	_, again := s2.getJSON("env-req-1", lastSeq)
	if again != goldenJSON {
		t.Errorf("after restart:\n%s\nbefore:\n%s", again, goldenJSON)
	}
	if statsAfter := s2.ok("", "stats", "-o", "json", "--min-seq", fmt.Sprint(lastSeq)); statsAfter != statsBefore {
		t.Errorf("stats after restart:\n%s\nbefore:\n%s", statsAfter, statsBefore)
	}
	// The log goes on after the old end.
	res, _ = s2.publish(0, `{"protocol":"mew/v0.4","id":"prop-after","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`)
	if res[0].Seq != lastSeq+1 {
		t.Errorf("first append after restart at seq %d, want %d", res[0].Seq, lastSeq+1)
	}
	s2.stop()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
