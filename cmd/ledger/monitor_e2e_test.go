package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
)

// Issue 34: `ledger monitor --once` copies a ledger's log, verified; the
// copy, imported with `ledger import` into a new ledger, gives the same
// tree root; a fork signed with the ledger's own key is a finding (exit
// 1, the kind and the sizes on stdout).
func TestMonitorCopyImportsToTheSameRoot(t *testing.T) {
	for _, v := range []string{"LEDGER_URL", "LEDGER_KEY", "LEDGER_STATE", "LEDGER_WITNESS_KEYS", "LEDGER_TOKEN", "LEDGER_INTERVAL", "LEDGER_METRICS", "LEDGER_DATA", "LEDGER_NATS_URL"} {
		t.Setenv(v, "")
	}
	keyFile := filepath.Join(t.TempDir(), "checkpoint.key")
	skey, err := proofs.GenerateKeyFile(keyFile, "monitor.example/ledger")
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := evidence.VerifierKeyOf(skey)
	if err != nil {
		t.Fatal(err)
	}
	withKey := func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointKeyFile = keyFile
	}
	publishN := func(a *app.App, prefix string, n int) {
		var b strings.Builder
		for i := range n {
			b.WriteString(opsrig.Env(fmt.Sprintf("%s-%d", prefix, i), "alice", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`))
			b.WriteByte('\n')
		}
		if code, _, stderr := runCLI(t, b.String(), "publish", "--api", a.HTTPURL(), "-q"); code != 0 {
			t.Fatalf("publish: %d %s", code, stderr)
		}
	}
	signed := func(a *app.App, n int64) evidence.Checkpoint {
		var cp evidence.Checkpoint
		waitFor(t, fmt.Sprintf("a checkpoint of %d leaves", n), func() bool {
			e, ok := a.Proofs().Log().Latest()
			cp = e.Checkpoint
			return ok && e.Checkpoint.Size >= n
		})
		return cp
	}
	a := apptest.Start(t, withKey)
	publishN(a, "p", 400)
	cp := signed(a, 400)
	state := filepath.Join(t.TempDir(), "monitor")
	code, stdout, stderr := runCLI(t, "", "monitor", "--url", a.HTTPURL(), "--key", vkey, "--state", state, "--once")
	var res struct {
		OK      bool   `json:"ok"`
		Size    int64  `json:"size"`
		Root    string `json:"root"`
		Entries int64  `json:"entries_verified"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || !res.OK || res.Size != cp.Size || res.Root != cp.Hash.String() || res.Entries != cp.Size {
		t.Fatalf("monitor --once: exit %d %v: %s %s", code, err, stdout, stderr)
	}

	// The copy into a new ledger: the same root.
	o := apptest.Options(t)
	withKey(&o)
	if code, _, stderr := runCLI(t, "", "import", "-f", filepath.Join(state, "log.jsonl"), "--data", o.DataDir, "--progress", "off"); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	b := apptest.StartWith(t, o)
	if got := signed(b, cp.Size); got.Size != cp.Size || got.Hash != cp.Hash {
		t.Fatalf("the imported copy signs %s, the ledger signed %s", got, cp)
	}

	// A fork signed with the same key, at the address the monitor follows.
	fork := apptest.Start(t, withKey)
	publishN(fork, "mallory", 450)
	signed(fork, 450)
	code, stdout, stderr = runCLI(t, "", "monitor", "--url", fork.HTTPURL(), "--key", vkey, "--state", state, "--once")
	if code != 1 || !strings.Contains(stdout, `"finding": "fork"`) || !strings.Contains(stdout, `"accepted_size": 400`) || !strings.Contains(stderr, "FINDING") {
		t.Fatalf("monitor --once on a fork: exit %d: %s %s", code, stdout, stderr)
	}
}
