package fold_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// listDeps returns the non-standard packages pkg depends on (with -deps)
// or imports directly.
func listDeps(t *testing.T, deps bool, pkg string) []string {
	t.Helper()
	args := []string{"list", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`}
	if deps {
		args = append(args, "-deps")
	} else {
		args = []string{"list", "-f", `{{join .Imports "\n"}}`}
	}
	out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// storeOrBus reports whether p is a package of Pebble or of NATS.
func storeOrBus(p string) bool {
	return strings.HasPrefix(p, "github.com/cockroachdb/") || strings.HasPrefix(p, "github.com/nats-io/")
}

// TestDependencies: the pure core links nothing of Pebble, and neither it
// nor the records import Pebble or NATS. The records (projections/model)
// link nothing of either, nor any other package of this module but
// internal/canon and subjects. The fold still links nats.go through package
// ledger (its envelope decoder and types); it may link nothing besides what
// ledger links, the records and package fold itself.
func TestDependencies(t *testing.T) {
	const mod = "github.com/mewledger/ledger/"
	for _, p := range listDeps(t, true, mod+"projections/model") {
		if storeOrBus(p) || (strings.HasPrefix(p, mod) && !slices.Contains([]string{mod + "projections/model", mod + "internal/canon", mod + "subjects"}, p)) {
			t.Errorf("projections/model depends on %s", p)
		}
	}
	for _, pkg := range []string{mod + "projections/model", mod + "projections/fold"} {
		for _, p := range listDeps(t, false, pkg) {
			if storeOrBus(p) {
				t.Errorf("%s imports %s", pkg, p)
			}
		}
	}
	viaLedger := listDeps(t, true, mod+"ledger")
	for _, p := range listDeps(t, true, mod+"projections/fold") {
		if strings.HasPrefix(p, "github.com/cockroachdb/pebble") {
			t.Errorf("projections/fold links Pebble (%s)", p)
		}
		if !slices.Contains(viaLedger, p) && !slices.Contains([]string{mod + "projections/fold", mod + "projections/model"}, p) {
			t.Errorf("projections/fold depends on %s, which package ledger does not", p)
		}
	}
}

// TestRecordUsersLinkNoStore: the wire types and the CLI's client take the
// records from projections/model, and link neither the projections
// package nor Pebble.
func TestRecordUsersLinkNoStore(t *testing.T) {
	const mod = "github.com/mewledger/ledger/"
	for _, pkg := range []string{mod + "internal/wire", mod + "internal/client"} {
		for _, p := range listDeps(t, true, pkg) {
			if p == mod+"projections" || strings.HasPrefix(p, "github.com/cockroachdb/pebble") {
				t.Errorf("%s depends on %s", pkg, p)
			}
		}
	}
}
