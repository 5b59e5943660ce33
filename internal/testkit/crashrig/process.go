package crashrig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// AddrFile is the file `ledger serve` writes under --data once it serves.
const AddrFile = "serve.addr.json"

// Addr is the content of AddrFile.
type Addr struct {
	HTTP string `json:"http"`
	NATS string `json:"nats"`
}

// ModuleRoot returns the directory of the go.mod above the working
// directory (tests run in their package's directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("crashrig: no go.mod above %s", wd)
		}
	}
}

// Build builds cmd/ledger into dir and returns the binary's path. With
// race it is built with -race (like a -race test binary, sharing its build
// cache, and catching the binary's own races, at several times the CPU).
func Build(t testing.TB, dir string, race bool) string {
	t.Helper()
	return BuildPkg(t, dir, "./cmd/ledger", "ledger", race)
}

// BuildPkg builds the main package pkg (relative to the module root) into
// dir/name and returns the binary's path.
func BuildPkg(t testing.TB, dir, pkg, name string, race bool) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	goTool := "go"
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "bin", "go"); fileExists(p) {
			goTool = p
		}
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = CleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crashrig: go build: %v\n%s", err, out)
	}
	return bin
}

// CleanEnv is the environment without LEDGER_* variables, so that a test's
// flags are the only configuration of the processes it starts.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGER_") {
			env = append(env, kv)
		}
	}
	return env
}

// FreePort returns a loopback port that was free when asked.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Logs is a concurrency-safe buffer for a process's output.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Tail returns the last n bytes written.
func (l *Logs) Tail(n int) string {
	s := l.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// Serve is a running `ledger serve` process.
type Serve struct {
	t    testing.TB
	Bin  string
	Data string
	Args []string
	Addr Addr
	Logs *Logs

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartServe starts `ledger serve --data data --http 127.0.0.1:0
// --log-format json` plus args, and waits (bounded) until it has written a
// fresh AddrFile. A stale AddrFile (left by a killed process) is removed
// first. t.Cleanup kills the process if it still runs.
func StartServe(t testing.TB, bin, data string, args ...string) *Serve {
	t.Helper()
	addrFile := filepath.Join(data, AddrFile)
	if err := os.Remove(addrFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	s := &Serve{t: t, Bin: bin, Data: data, Args: args, Logs: &Logs{}, done: make(chan struct{})}
	all := append([]string{"serve", "--data", data, "--http", "127.0.0.1:0", "--log-format", "json"}, args...)
	s.cmd = exec.Command(bin, all...)
	s.cmd.Env = CleanEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.Logs, s.Logs
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
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil && json.Unmarshal(b, &s.Addr) == nil && s.Addr.HTTP != "" && s.Addr.NATS != "" {
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("crashrig: ledger serve exited (%v) before serving:\n%s", s.err, s.Logs.Tail(8192))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("crashrig: no %s after 90s:\n%s", addrFile, s.Logs.Tail(8192))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// API is the base URL of the HTTP API.
func (s *Serve) API() string { return "http://" + s.Addr.HTTP }

// Pid is the process id.
func (s *Serve) Pid() int { return s.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to be gone.
func (s *Serve) Kill() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Stop sends SIGTERM and waits (bounded) for a clean exit.
func (s *Serve) Stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("crashrig: SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("crashrig: ledger serve still running 60s after SIGTERM:\n%s", s.Logs.Tail(8192))
	}
	if s.err != nil {
		s.t.Fatalf("crashrig: ledger serve exited with %v:\n%s", s.err, s.Logs.Tail(8192))
	}
}

// Exited reports whether the process has ended, and how.
func (s *Serve) Exited() (bool, error) {
	select {
	case <-s.done:
		return true, s.err
	default:
		return false, nil
	}
}

// NATSListen returns "127.0.0.1:<port>" for --nats-listen.
func NATSListen(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// String describes the process.
func (s *Serve) String() string { return fmt.Sprintf("ledger serve pid %d (%s)", s.Pid(), s.Data) }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
