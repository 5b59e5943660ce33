package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
)

// healthcheckLine is the Dockerfile's HEALTHCHECK in exec form.
var healthcheckLine = regexp.MustCompile(`(?m)^HEALTHCHECK .*CMD (\[.*\])\s*$`)

// TestHealthChecks: the image and the compose file probe the ledger with
// `ledger health`, whose arguments parse, and which exits 1 (never 2, which
// Docker reserves) when no ledger answers; .dockerignore keeps build
// outputs, data and .git out of the build context but not the sources.
func TestHealthChecks(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := healthcheckLine.FindSubmatch(df)
	if m == nil {
		t.Fatal("deploy/Dockerfile has no HEALTHCHECK ... CMD [...]")
	}
	var dockerCmd []string
	if err := json.Unmarshal(m[1], &dockerCmd); err != nil {
		t.Fatalf("HEALTHCHECK CMD %s: %v", m[1], err)
	}
	ctx := context.Background()
	wd, _ := os.Getwd()
	details, err := loader.LoadConfigFiles(ctx, []string{"docker-compose.yml"}, wd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("deploy", true) })
	if err != nil {
		t.Fatal(err)
	}
	hc := p.Services["ledger"].HealthCheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
		t.Fatalf("the compose ledger service's healthcheck: %+v, want [CMD ledger health ...]", hc)
	}
	bin := filepath.Join(t.TempDir(), "ledger")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/ledger").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for where, argv := range map[string][]string{"Dockerfile": dockerCmd, "docker-compose.yml": hc.Test[1:]} {
		if len(argv) < 2 || argv[0] != "/usr/local/bin/ledger" || argv[1] != "health" {
			t.Errorf("%s: healthcheck runs %q, want /usr/local/bin/ledger health", where, argv)
			continue
		}
		// Nothing listens on port 1: the probe must say unhealthy (1).
		cmd := exec.Command(bin, append(argv[1:], "--timeout", "2s")...)
		cmd.Env = append(os.Environ(), "LEDGER_API=", "LEDGER_HTTP=127.0.0.1:1", "LEDGER_TIMEOUT=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%s: ledger %s with no ledger: %v, want exit status 1\n%s", where, strings.Join(argv[1:], " "), err, out)
		}
	}

	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines[l] = true
		}
	}
	for _, want := range []string{".git", "bin/", "data/"} {
		if !lines[want] {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	// What the Dockerfile copies by name must stay in the context.
	for _, keep := range []string{"go.mod", "go.sum", "client/go.mod", "model/go.mod", "cmd/", "internal/"} {
		for l := range lines {
			if strings.TrimSuffix(l, "/") == strings.TrimSuffix(keep, "/") || l == "*" {
				t.Errorf(".dockerignore excludes %s, which the build needs", keep)
			}
		}
	}
}
