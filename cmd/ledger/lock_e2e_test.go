package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runBin runs the binary with args and returns its exit code and
// combined output.
func runBin(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("run ledger %v: %v", args, err)
	}
	return 0, out.String()
}

// Issue 15, item 1: a second `ledger serve` on a data directory in use
// fails at once naming the holder's pid, before it touches anything in
// the directory; the first keeps serving with its data and its address
// file intact. Offline commands on the directory are refused the same
// way, and a taken NATS port fails the start at once.
func TestSecondServeOnOneDataDirectory(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	data := filepath.Join(dir, "data")
	first := startServer(t, bin, data)
	res, _ := first.publish(0, e2eProposal)
	if len(res) != 1 || res[0].Seq == 0 {
		t.Fatalf("publish: %+v", res)
	}
	addrFile := filepath.Join(data, "serve.addr.json")
	addrBefore, err := os.ReadFile(addrFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(first.cmd.Process.Pid)

	// The second serve: another NATS port, so only the lock can stop it.
	code, out := runBin(t, bin, "serve", "--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--log-format", "json")
	if code == 0 {
		t.Fatalf("second serve exited 0:\n%s", out)
	}
	if !strings.Contains(out, "process "+pid) || !strings.Contains(out, "data directory in use") {
		t.Fatalf("second serve's error does not name the holder pid %s:\n%s", pid, out)
	}
	if strings.Contains(out, "Starting nats-server") || strings.Contains(out, "JetStream") {
		t.Fatalf("second serve started NATS on the live store:\n%s", out)
	}

	// An offline command that would start its own NATS on <data>/nats
	// (here: the address file is out of its sight) is refused the same
	// way instead of opening the live store.
	if err := os.Rename(addrFile, addrFile+".hidden"); err != nil {
		t.Fatal(err)
	}
	code, out = runBin(t, bin, "export", "--data", data, "-f", filepath.Join(dir, "x.ndjson"))
	if err := os.Rename(addrFile+".hidden", addrFile); err != nil {
		t.Fatal(err)
	}
	if code == 0 || !strings.Contains(out, "process "+pid) {
		t.Fatalf("offline export on a served directory: exit %d, want an error naming pid %s:\n%s", code, pid, out)
	}

	// The first is untouched: its addr file, its data, its service.
	addrAfter, err := os.ReadFile(addrFile)
	if err != nil || !bytes.Equal(addrBefore, addrAfter) {
		t.Fatalf("address file changed or removed by the loser: %q (%v), was %q", addrAfter, err, addrBefore)
	}
	if exited, err := first.exited(); exited {
		t.Fatalf("first serve exited (%v):\n%s", err, first.logs)
	}
	p, _ := first.getJSON("env-req-1", res[0].Seq)
	if p.ID != "env-req-1" {
		t.Fatalf("first serve lost the proposal: %+v", p)
	}
	res2, _ := first.publish(0, strings.Replace(e2eProposal, "env-req-1", "env-req-2", 1))
	if len(res2) != 1 || res2[0].Seq != res[0].Seq+1 {
		t.Fatalf("append after the second start: %+v, want seq %d", res2, res[0].Seq+1)
	}

	// A taken NATS port: another directory, the first's NATS port.
	natsPort := strings.TrimPrefix(first.addr.NATS, "nats://")
	code, out = runBin(t, bin, "serve", "--data", filepath.Join(dir, "other"), "--http", "127.0.0.1:0", "--nats-listen", natsPort, "--log-format", "json")
	if code == 0 || !strings.Contains(out, "fatal error") || !strings.Contains(out, natsPort) {
		t.Fatalf("serve on a taken NATS port: exit %d, want a fatal error naming %s:\n%s", code, natsPort, out)
	}
	first.stop()
	if _, err := os.Stat(addrFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("first serve did not remove its own address file: %v", err)
	}
}

// exited reports whether the process has ended, and how.
func (s *server) exited() (bool, error) {
	select {
	case <-s.done:
		return true, s.err
	default:
		return false, nil
	}
}
