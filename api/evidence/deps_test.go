package evidence_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: the package links only the standard library and
// golang.org/x/mod (sumdb/tlog, sumdb/note): nothing of the server, so the
// client module, the CLI's offline verifier and any third party can use it.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "github.com/mewledger/ledger/api/evidence").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/mewledger/ledger/api/evidence" || strings.HasPrefix(p, "golang.org/x/mod/") {
			continue
		}
		t.Errorf("evidence depends on %s", p)
	}
}
