package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// TestGetVerify: `ledger get --verify` proves a proposal's read against
// the ledger's checkpoints with the verifier key, keeps the checkpoint in
// the default state file under the user's config dir (0600), and fails
// (exit 1, nothing kept) against a second ledger signing with the same key
// a shorter history (a shrunk log), and without a key (usage).
func TestGetVerify(t *testing.T) {
	for _, v := range []string{"LEDGER_API", "LEDGER_SPACE", "LEDGER_VERIFIER_KEY", "LEDGER_VERIFY_STATE", "LEDGER_VERIFY", "LEDGER_TOKEN"} {
		t.Setenv(v, "")
	}
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("HOME", cfg) // os.UserConfigDir on macOS
	fast := func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointOrigin = "getverify.test/ledger"
	}
	a := apptest.Start(t, fast)
	apiURL := a.HTTPURL()
	if code, _, stderr := runCLI(t, e2eProposal+"\n"+e2eFulfil+"\n"+e2eResponse+"\n", "publish", "--api", apiURL, "-q"); code != 0 {
		t.Fatalf("publish: %d %s", code, stderr)
	}
	vkey := a.Proofs().VerifierKey()

	if code, _, stderr := runCLI(t, "", "get", "--api", apiURL, "--verify", "env-req-1"); code != exitUsage || !strings.Contains(stderr, "--verifier-key") {
		t.Fatalf("--verify without a key: %d %s", code, stderr)
	}
	var stdout, stderr string
	code := -1
	for deadline := testctx.Deadline(t); code != 0; {
		code, stdout, stderr = runCLI(t, "", "get", "--api", apiURL, "--verify", "--verifier-key", vkey, "--min-seq", "3", "-q", "env-req-1")
		if code != 0 && time.Now().After(deadline) {
			t.Fatalf("get --verify: %d %s %s", code, stdout, stderr)
		}
		if code != 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	// -q silences the which-ledger line, not the verdict.
	if !strings.Contains(stdout, "env-req-1") || !strings.HasPrefix(stderr, "verified: ") || !strings.Contains(stderr, "getverify.test/ledger@") {
		t.Fatalf("get --verify: %s %s", stdout, stderr)
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "ledger", "checkpoints", "getverify.test%2Fledger")
	fi, err := os.Stat(state)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("default state file %s: %v %v", state, fi, err)
	}
	kept, _ := os.ReadFile(state)

	// A second ledger with the first one's signing key and one event.
	b := apptest.Start(t, fast, func(o *app.Options) { o.CheckpointKeyFile = filepath.Join(a.Options().DataDir, app.CheckpointKeyName) })
	if code, _, stderr := runCLI(t, e2eProposal+"\n", "publish", "--api", b.HTTPURL(), "-q"); code != 0 {
		t.Fatalf("publish to B: %d %s", code, stderr)
	}
	for deadline := testctx.Deadline(t); ; {
		code, stdout, stderr = runCLI(t, "", "get", "--api", b.HTTPURL(), "--verify", "--verifier-key", vkey, "--min-seq", "1", "-q", "env-req-1")
		if code == exitFailed && strings.Contains(stderr, "log shrank") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get --verify against a shrunk log: %d %s %s", code, stdout, stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now, _ := os.ReadFile(state); string(now) != string(kept) {
		t.Fatalf("the kept checkpoint changed after a failed read")
	}
}
