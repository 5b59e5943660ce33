package lint

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/mewledger/ledger"

// goList runs `go list` with args in dir and returns its output's lines.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// TestCoreImportsNoInternal: api, ledger, projections and subjects are the
// layers everything else builds on; none of them climbs back up into
// internal/ (helpers they need live beside them, as ledger/canon does).
func TestCoreImportsNoInternal(t *testing.T) {
	const format = `{{.ImportPath}}:{{join .Imports ","}}`
	lines := goList(t, "../..", "-f", format, "./ledger/...", "./projections/...", "./subjects/...")
	lines = append(lines, goList(t, "../../api", "-f", format, "./...")...)
	if len(lines) < 8 {
		t.Fatalf("go list found %d core packages", len(lines))
	}
	for _, l := range lines {
		from, imports, _ := strings.Cut(l, ":")
		for _, p := range strings.Split(imports, ",") {
			if strings.HasPrefix(p, mod+"/internal/") {
				t.Errorf("%s imports %s", from, p)
			}
		}
	}
}

// TestShippedBinaryLinksNoTestCode: the ledger binary links neither the
// test kit (the stand-in gateway, the test servers) nor net/http/httptest.
func TestShippedBinaryLinksNoTestCode(t *testing.T) {
	for _, p := range goList(t, "../..", "-deps", "./cmd/ledger") {
		if strings.HasPrefix(p, mod+"/internal/testkit") || p == "net/http/httptest" {
			t.Errorf("cmd/ledger links %s", p)
		}
	}
}

// TestAPILinksOnlyStdlibAndXMod: the contract links the standard library
// and golang.org/x/mod (sumdb/tlog, sumdb/note) only.
func TestAPILinksOnlyStdlibAndXMod(t *testing.T) {
	for _, p := range goList(t, "../../api", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...") {
		if strings.HasPrefix(p, mod+"/api") || strings.HasPrefix(p, "golang.org/x/mod/") {
			continue
		}
		t.Errorf("api links %s", p)
	}
}
