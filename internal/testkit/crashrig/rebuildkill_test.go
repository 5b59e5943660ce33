package crashrig_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/crashrig"
)

// TestKillDuringOfflineRebuild (issue 29 item 8): `ledger rebuild` killed
// with SIGKILL while it folds leaves <data>/projection.new behind; the
// next offline rebuild, and the next `ledger serve`, remove it with a log
// line, and the projection is whole.
func TestKillDuringOfflineRebuild(t *testing.T) {
	bin := crashrig.Build(t, t.TempDir(), false)
	data := t.TempDir()
	srv := crashrig.StartServe(t, bin, data, "--nats-listen", crashrig.NATSListen(crashrig.FreePort(t)), "--log-level", "warn")
	g := workload.New(workload.Options{Seed: 29, Prefix: "K-", Mix: workload.Mix{Fulfil: 20, Withdraw: 10}})
	var body bytes.Buffer
	for _, raw := range g.Batch(20_000) {
		body.Write(raw)
		body.WriteByte('\n')
	}
	resp, err := http.Post(srv.API()+"/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // the answers: to the end, every line appended
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("publish: %d", resp.StatusCode)
	}
	before, err := status(srv.API())
	if err != nil || before.StreamSeq < 20_000 {
		t.Fatalf("status after publishing: %+v %v", before, err)
	}
	srv.Stop()

	leftover := filepath.Join(data, "projection.new")
	kill := func() {
		t.Helper()
		for attempt := 0; ; attempt++ {
			cmd := exec.Command(bin, "rebuild", "--data", data)
			cmd.Env = crashrig.CleanEnv()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			caught := false
			for deadline := time.Now().Add(time.Minute); !caught && time.Now().Before(deadline); {
				select {
				case <-done:
				default:
					if ents, err := os.ReadDir(leftover); err == nil && len(ents) > 0 {
						_ = cmd.Process.Signal(syscall.SIGKILL)
						caught = true
						continue
					}
					time.Sleep(time.Millisecond)
					continue
				}
				break
			}
			<-done
			if _, err := os.Stat(leftover); err == nil {
				return
			}
			if attempt == 5 {
				t.Fatal("never caught ledger rebuild while it folded")
			}
		}
	}

	// The next offline rebuild removes it, and says so.
	kill()
	out, err := runCmd(bin, "rebuild", "--data", data)
	if err != nil {
		t.Fatalf("rebuild after the kill: %v\n%s", err, out)
	}
	if !strings.Contains(out, "removed the leftover of an interrupted rebuild") {
		t.Fatalf("no log line about the leftover:\n%s", out)
	}
	if _, err := os.Stat(leftover); err == nil {
		t.Fatal("projection.new still there after a rebuild")
	}

	// So does the next serve; the projection is whole.
	kill()
	srv = crashrig.StartServe(t, bin, data, "--nats-listen", crashrig.NATSListen(crashrig.FreePort(t)))
	if _, err := os.Stat(leftover); err == nil {
		t.Fatal("projection.new still there after serve started")
	}
	if !strings.Contains(srv.Logs.String(), "removed the leftover of an interrupted rebuild") {
		t.Fatalf("serve logged nothing about the leftover:\n%s", srv.Logs.Tail(4096))
	}
	st, err := status(srv.API())
	if err != nil {
		t.Fatal(err)
	}
	if st.StreamSeq != before.StreamSeq || st.ProjectedSeq != st.StreamSeq {
		t.Fatalf("after the kills: %+v, before %+v", st, before)
	}
	srv.Stop()
}

func runCmd(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = crashrig.CleanEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}
