// Package litewitness runs the real C2SP witness litewitness
// (filippo.io/torchwood v0.6.1 cmd/litewitness), for tests
// (internal/testkit/witnesskit) and `ledger bench --only witness`: it
// builds the binary from the module proxy into the caller's temporary
// directory, serves its Ed25519 key from an ssh-agent of its own
// (golang.org/x/crypto/ssh/agent, in the calling process), writes the
// log's origin and verifier key into its sqlite database (witnessdb, what
// witnessctl would write), and starts it on a loopback port. A caller that
// cannot build or start it fails (T.Fatal): a test is never skipped.
package litewitness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// The witness built: litewitness of filippo.io/torchwood at this version,
// from the module proxy, in a module of its own (its tests' dependencies
// are not all on the proxy, so it is no tool of this module: go mod tidy
// would fail on them).
const (
	Litewitness        = "filippo.io/torchwood/cmd/litewitness"
	LitewitnessVersion = "v0.6.1"
	// zombiezen.com/go/sqlite at the version torchwood v0.6.1 requires,
	// for witnessdb.
	sqliteModule = "zombiezen.com/go/sqlite@v1.4.2"
)

// witnessdbSource is the source of witnessdb, built with litewitness.
//
//go:embed testdata/witnessdb.go.src
var witnessdbSource []byte

var buildMu sync.Mutex

// T is what the package needs of its caller: testing.TB has it, and
// `ledger bench`'s witness figure provides it outside a test (a Fatal
// there ends the figure with an error). The package imports no testing
// code, so the shipped binary may link it.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Build builds litewitness and witnessdb into dir, in a module of their
// own made there, and returns their paths. It fails the test when it
// cannot (no module proxy, a build error).
func Build(t T, dir string) (litewitness, witnessdb string) {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(filepath.Join(src, "witnessdb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module witnesskit.build\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "witnessdb", "main.go"), witnessdbSource, 0o644); err != nil {
		t.Fatal(err)
	}
	litewitness, witnessdb = filepath.Join(dir, "litewitness"), filepath.Join(dir, "witnessdb")
	for _, args := range [][]string{
		{"get", Litewitness + "@" + LitewitnessVersion, sqliteModule},
		{"build", "-o", litewitness, Litewitness},
		{"build", "-o", witnessdb, "./witnessdb"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		b, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("litewitness: go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	return litewitness, witnessdb
}

// Witness is one running litewitness.
type Witness struct {
	// Name is the witness's name (its key's); URL its base URL; VKey its
	// cosignature/v1 verifier key.
	Name, URL, VKey string
	// Signer is the witness's key as torchwood's cosignature signer
	// (its Verifier is an independent implementation of cosignature/v1).
	Signer *torchwood.CosignatureSigner

	t        T
	bin, db  string
	sock     string
	addr     string
	keyFP    string
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	stderr   *syncBuf
	agentLn  net.Listener
	agentWG  sync.WaitGroup
	agentKey agent.Agent
}

// Start builds (when bin is "") and starts a litewitness named name that
// witnesses the log origin signed by logVKey. It is stopped at the test's
// end.
func Start(t T, name, origin, logVKey string) *Witness {
	t.Helper()
	dir := t.TempDir()
	bin, dbtool := Build(t, dir)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	w := &Witness{Name: name, VKey: signer.Verifier().String(), Signer: signer, t: t, bin: bin,
		db: filepath.Join(dir, "litewitness.db"), keyFP: ssh.FingerprintSHA256(sshPub)}
	// The ssh-agent: a socket path short enough for a unix address.
	sockDir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	w.sock = filepath.Join(sockDir, "agent.sock")
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	w.agentKey = kr
	if w.agentLn, err = net.Listen("unix", w.sock); err != nil {
		t.Fatal(err)
	}
	w.agentWG.Add(1)
	go w.serveAgent()
	t.Cleanup(w.closeAgent)

	if out, err := exec.Command(dbtool, "-db", w.db, "-origin", origin, "-key", logVKey).CombinedOutput(); err != nil {
		t.Fatalf("litewitness: witnessdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = l.Addr().String()
	_ = l.Close()
	w.URL = "http://" + w.addr
	w.Restart()
	t.Cleanup(w.Stop)
	return w
}

func (w *Witness) serveAgent() {
	defer w.agentWG.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := w.agentLn.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer c.Close()
			_ = agent.ServeAgent(w.agentKey, c)
		}()
	}
}

func (w *Witness) closeAgent() {
	_ = w.agentLn.Close()
	w.Stop() // its connection to the agent closes with it
	w.agentWG.Wait()
}

// Flag returns the ledger's --witness value for this witness.
func (w *Witness) Flag() string { return w.VKey + " " + w.URL }

// Restart starts the witness (again, on the same address, database and
// key) and waits until it answers.
func (w *Witness) Restart() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return
	}
	w.stderr = &syncBuf{}
	cmd := exec.Command(w.bin, "-name", w.Name, "-db", w.db, "-ssh-agent", w.sock, "-key", w.keyFP, "-listen", w.addr)
	cmd.Stdout, cmd.Stderr = w.stderr, w.stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("litewitness: start litewitness: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	w.cmd, w.exited = cmd, exited
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			w.cmd = nil
			w.t.Fatalf("litewitness: litewitness exited: %s", w.stderr)
		default:
		}
		resp, err := http.Get(w.URL + "/")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("litewitness: litewitness does not answer on %s after 60s: %v\n%s", w.addr, err, w.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the witness (safe when stopped) and waits for it to exit.
func (w *Witness) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Signal(os.Interrupt)
	select {
	case <-w.exited:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
	w.cmd = nil
}

// Log returns what the witness wrote to its standard error so far.
func (w *Witness) Log() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stderr == nil {
		return ""
	}
	return w.stderr.String()
}

// String names the witness.
func (w *Witness) String() string { return fmt.Sprintf("litewitness %s at %s", w.Name, w.URL) }

// syncBuf is a bytes.Buffer safe for the process's writers and Log.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// NewKey returns the cosignature/v1 verifier key of a new witness key
// named name (a witness that cosigns nothing).
func NewKey(t T, name string) string {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	return s.Verifier().String()
}
