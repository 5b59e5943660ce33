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

// TestDependencies: the pure core links nothing of Pebble or NATS. The
// records (model, a module of their own) link nothing but the standard
// library. The fold (projections/fold)
// links neither: it takes the envelope dialect from package ledger, whose
// JetStream side lives in ledger/appendlog, which the fold must not link.
func TestDependencies(t *testing.T) {
	const mod = "github.com/mewledger/ledger/"
	for _, p := range listDeps(t, mod+"model") {
		if p != mod+"model" {
			t.Errorf("model depends on %s", p)
		}
	}
	for _, p := range listDeps(t, mod+"projections/fold") {
		if storeOrBus(p) || p == mod+"ledger/appendlog" {
			t.Errorf("projections/fold depends on %s", p)
		}
	}
}

// TestRecordUsersLinkNoStore: the wire types and the CLI's client take the
// records from model, and link neither the projections
// package nor Pebble.
func TestRecordUsersLinkNoStore(t *testing.T) {
	const mod = "github.com/mewledger/ledger/"
	for _, pkg := range []string{mod + "internal/lib/wire", mod + "internal/lib/apiclient"} {
		for _, p := range listDeps(t, pkg) {
			if p == mod+"projections" || strings.HasPrefix(p, "github.com/cockroachdb/pebble") {
				t.Errorf("%s depends on %s", pkg, p)
			}
		}
	}
}
