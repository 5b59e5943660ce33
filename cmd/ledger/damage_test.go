package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/blockfile"
	"github.com/mewledger/ledger/subjects"
)

// Issue 33: the commands that meet a damaged log say so (exit 1, the
// kind and the seq), never "internal error": `ledger proof` (which never
// writes a bundle that does not verify), `get --verify`, `verify --api`;
// after `ledger rebuild` on the altered stream, `get --verify` reports the
// log rewritten, naming the size and both roots.
func TestCommandsOnADamagedLog(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_SPACE", "LEDGER_VERIFIER_KEY", "LEDGER_VERIFY_STATE", "LEDGER_VERIFY", "LEDGER_TOKEN", "LEDGER_DATA"} {
		t.Setenv(v, "")
	}
	o := apptest.Options(t)
	o.CheckpointInterval = 20 * time.Millisecond
	o.ScrubPeriod = 100 * time.Millisecond
	o.ScrubRate = -1
	a := apptest.StartWith(t, o)
	if code, _, stderr := runCLI(t, e2eProposal+"\n"+e2eFulfil+"\n"+e2eResponse+"\n", "publish", "--api", a.HTTPURL(), "-q"); code != 0 {
		t.Fatalf("publish: %d %s", code, stderr)
	}
	waitFor(t, "a checkpoint of the 3 events", func() bool {
		e, ok := a.Proofs().Log().Latest()
		return ok && e.Checkpoint.Size == 3
	})
	vkey := a.Proofs().VerifierKey()
	state := filepath.Join(t.TempDir(), "state")
	if code, _, stderr := runCLI(t, "", "get", "--api", a.HTTPURL(), "--verify", "--verifier-key", vkey, "--verify-state", state, "env-req-1"); code != 0 {
		t.Fatalf("get --verify before any damage: %d %s", code, stderr)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCLI(t, "", "verify", "--scrub", "--data", o.DataDir); code != 0 || !strings.Contains(stdout, `"ok": true`) || !strings.Contains(stdout, `"checked": 3`) {
		t.Fatalf("verify --scrub on a whole log: exit %d: %s %s", code, stdout, stderr)
	}
	if err := blockfile.Rewrite(o.NATSDir(), subjects.StreamName, 1, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"content":"hello"`), []byte(`"content":"HELLO"`), 1)
	}); err != nil {
		t.Fatal(err)
	}

	// Offline, one full pass names it.
	code, stdout, stderr := runCLI(t, "", "verify", "--scrub", "--data", o.DataDir)
	if code != 1 || !strings.Contains(stdout, `"ok": false`) || !strings.Contains(stdout, `"kind": "altered"`) || !strings.Contains(stderr, "seq 1 altered") {
		t.Fatalf("verify --scrub on an altered log: exit %d: %s %s", code, stdout, stderr)
	}

	a = apptest.StartWith(t, o)
	api := a.HTTPURL()
	waitFor(t, "/readyz 503 log_damaged", func() bool {
		resp, err := http.Get(api + "/readyz")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "log_damaged")
	})
	file := filepath.Join(t.TempDir(), "bundle.json")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"proof", []string{"proof", "--api", api, "-o", file, "env-req-1"}},
		{"get --verify", []string{"get", "--api", api, "--verify", "--verifier-key", vkey, "--verify-state", state, "env-req-1"}},
		{"verify --api", []string{"verify", "--api", api}},
	} {
		code, stdout, stderr := runCLI(t, "", c.args...)
		t.Logf("%s: exit %d: %s%s", c.name, code, stdout, stderr)
		if code != 1 || !strings.Contains(stderr, "log_damaged") || !strings.Contains(stderr, "seq 1 altered") || strings.Contains(stderr, "internal") {
			t.Fatalf("%s on an altered log: exit %d, stderr %s", c.name, code, stderr)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("ledger proof wrote a bundle from a damaged log: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// The projection rebuilt from the altered stream: its tree no longer
	// extends the checkpoints signed.
	if code, _, stderr := runCLI(t, "", "rebuild", "--data", o.DataDir, "-q"); code != 0 {
		t.Fatalf("rebuild: %d %s", code, stderr)
	}
	a = apptest.StartWith(t, o)
	api = a.HTTPURL()
	waitFor(t, "the rewrite named", func() bool {
		d, ok := a.LogDamage()
		return ok && d.Kind == "rewritten"
	})
	code, _, stderr = runCLI(t, "", "get", "--api", api, "--verify", "--verifier-key", vkey, "--verify-state", state, "env-req-1")
	t.Logf("get --verify after the rebuild: exit %d: %s", code, stderr)
	if code != 1 || !strings.Contains(stderr, "log rewritten") || !strings.Contains(stderr, "has root") || !strings.Contains(stderr, "the checkpoint signed for size") {
		t.Fatalf("get --verify on a rewritten log: exit %d, stderr %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "", "proof", "--api", api, "-o", file, "env-req-1"); code != 1 || !strings.Contains(stderr, "log rewritten") {
		t.Fatalf("proof on a rewritten log: exit %d, stderr %s", code, stderr)
	}
	if e, _ := a.Proofs().Log().Latest(); e.Checkpoint.Size != 3 {
		t.Fatalf("signed size %d on a rewritten tree", e.Checkpoint.Size)
	}
}

// Contract §9: an export never hides a hole. A record lost from the block
// file: export refuses (exit 1, naming the seq) unless --allow-gaps, then
// the file and the summary name it; verify --export says ok:false.
func TestExportRefusesAHole(t *testing.T) {
	t.Setenv("LEDGER_DATA", "")
	o := apptest.Options(t)
	a := apptest.StartWith(t, o)
	if code, _, stderr := runCLI(t, e2eProposal+"\n"+e2eFulfil+"\n"+e2eResponse+"\n", "publish", "--api", a.HTTPURL(), "-q"); code != 0 {
		t.Fatalf("publish: %d %s", code, stderr)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := blockfile.FlipByte(o.NATSDir(), subjects.StreamName, 2); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "log.jsonl")
	code, _, stderr := runCLI(t, "", "export", "--data", o.DataDir, "-f", file)
	if code != 1 || !strings.Contains(stderr, "seq 2 is missing") {
		t.Fatalf("export of a log with a hole: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused export left a file: %v", err)
	}
	code, _, stderr = runCLI(t, "", "export", "--data", o.DataDir, "-f", file, "--allow-gaps")
	if code != 0 || !strings.Contains(stderr, "MISSING from the log, and so from the file: seq 2") {
		t.Fatalf("export --allow-gaps: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(data), `"missing_before":{"from":2,"to":2}`) {
		t.Fatalf("the file does not name the hole: %v\n%s", err, data)
	}
	code, stdout, stderr := runCLI(t, "", "verify", "--export", file)
	if code != 1 || !strings.Contains(stdout, `"ok": false`) || !strings.Contains(stderr, "seq 2 missing") {
		t.Fatalf("verify --export of a file with a hole: exit %d: %s %s", code, stdout, stderr)
	}
}
