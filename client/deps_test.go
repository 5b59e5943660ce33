package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: an agent that imports the client links neither the
// store (Pebble), nor NATS, nor any server code of this module: only the
// record types (model), the evidence package (client/evidence, for
// verified reads) with the Go checksum database's note and tlog packages,
// and the standard library.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/mewledger/ledger/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		switch p {
		case "github.com/mewledger/ledger/client", "github.com/mewledger/ledger/api", "github.com/mewledger/ledger/api/evidence",
			"golang.org/x/mod/sumdb/note", "golang.org/x/mod/sumdb/tlog":
			continue
		}
		t.Errorf("the client depends on %s", p)
	}
}

// TestOutsideAgent builds and runs examples/agent, a module of its own that
// imports only this package, against a real ledger.
func TestOutsideAgent(t *testing.T) {
	cmd := exec.Command("go", "run", ".", "-api", ledgerURL, "-id", "outside-1")
	cmd.Dir = "../examples/agent"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run examples/agent: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "outside-1 is pending, proposed by outside-agent to [fs-agent]") {
		t.Fatalf("examples/agent printed:\n%s", out)
	}
}
