package fold_test

import (
	"os/exec"
	"strings"
	"testing"
)

// listDeps returns the non-standard packages pkg depends on, pkg
// included (go list -deps).
func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// storeOrBus reports whether p is a package of Pebble or of NATS.
func storeOrBus(p string) bool {
	return strings.HasPrefix(p, "github.com/cockroachdb/") || strings.HasPrefix(p, "github.com/nats-io/")
}

// TestDependencies: the pure core links nothing of Pebble or NATS (the
// contract, api, is a module of its own: internal/lint checks it). The fold
// (projections/fold) links neither: it takes the envelope dialect from package ledger, whose
// JetStream side lives in ledger/appendlog, which the fold must not link.
func TestDependencies(t *testing.T) {
	const mod = "github.com/mewledger/ledger/"
	for _, p := range listDeps(t, mod+"projections/fold") {
		if storeOrBus(p) || p == mod+"ledger/appendlog" {
			t.Errorf("projections/fold depends on %s", p)
		}
	}
}
