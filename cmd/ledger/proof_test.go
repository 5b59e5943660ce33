package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// TestProofAndVerifyBundle: `ledger proof` saves a proposal's bundle,
// `ledger checkpoint key` prints the verifier key from the data directory,
// and `ledger verify --bundle --key` accepts the file with nothing else,
// and refuses an edited one or another key with exit status 1 and the
// failure's kind, a missing key with a usage error.
func TestProofAndVerifyBundle(t *testing.T) {
	a := apptest.Start(t, func(o *app.Options) { o.CheckpointInterval = 20 * time.Millisecond })
	apiURL := a.HTTPURL()
	if code, _, stderr := runCLI(t, e2eProposal+"\n"+e2eFulfil+"\n"+e2eResponse+"\n", "publish", "--api", apiURL, "-q"); code != 0 {
		t.Fatalf("publish: %d %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "env-req-1.evidence.json")
	deadline := testctx.Deadline(t)
	for {
		code, _, stderr := runCLI(t, "", "proof", "--api", apiURL, "-q", "-o", file, "env-req-1")
		if code == 0 {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), `"leaf_index"`); n >= 2 { // the proposal and its fulfilment (and the response when filed there)
				break
			}
		} else if !strings.Contains(stderr, "no_checkpoint") && !strings.Contains(stderr, "no events") {
			t.Fatalf("proof: %d %s", code, stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no bundle with both events")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, stdout, stderr := runCLI(t, "", "checkpoint", "key", "--data", a.Options().DataDir)
	vkey := strings.TrimSpace(stdout)
	if code != 0 || vkey != a.Proofs().VerifierKey() {
		t.Fatalf("checkpoint key: %d %q %s", code, stdout, stderr)
	}
	keyFile := filepath.Join(t.TempDir(), "verifier.key")
	if err := os.WriteFile(keyFile, []byte(vkey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{vkey, keyFile} {
		code, stdout, stderr = runCLI(t, "", "verify", "--bundle", file, "--key", key)
		if code != 0 || !strings.Contains(stdout, `"ok": true`) || !strings.Contains(stdout, `"proposal": "env-req-1"`) {
			t.Fatalf("verify --bundle --key %s: %d %s %s", key, code, stdout, stderr)
		}
	}

	// Tampered: the proposal's path changed in the file.
	raw, _ := os.ReadFile(file)
	bad := filepath.Join(t.TempDir(), "tampered.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(raw), `notes.txt`, `/etc/passwd`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "", "verify", "--bundle", bad, "--key", vkey)
	if code != exitFailed || !strings.Contains(stdout, `"mismatch"`) || !strings.Contains(stderr, "seq 1:") {
		t.Fatalf("tampered bundle: %d %s %s", code, stdout, stderr)
	}
	// Another ledger's key.
	_, other, _ := evidence.GenerateKey(rand.Reader, "elsewhere/ledger")
	code, stdout, _ = runCLI(t, "", "verify", "--bundle", file, "--key", other)
	if code != exitFailed || !strings.Contains(stdout, `"signature"`) && !strings.Contains(stdout, `"origin"`) {
		t.Fatalf("another key: %d %s", code, stdout)
	}
	if code, _, stderr = runCLI(t, "", "verify", "--bundle", file); code != exitUsage || !strings.Contains(stderr, "--key") {
		t.Fatalf("no key: %d %s", code, stderr)
	}
	if code, _, _ = runCLI(t, "", "proof", "--api", apiURL, "-q", "env-req-1"); code != exitUsage {
		t.Fatalf("proof without -o: %d", code)
	}
}
