package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestConsumerModuleGraph: a module of an integrator's that imports the
// client (built in a temporary directory, with replace directives to this
// repository's client and api, as go get would resolve them) has none of
// the server's dependencies in its module graph: the client is pure HTTP.
func TestConsumerModuleGraph(t *testing.T) {
	clientDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	apiDir := filepath.Join(filepath.Dir(clientDir), "api")
	dir := t.TempDir()
	goMod := "module example.com/consumer\n\ngo 1.26.8\n\n" +
		"require github.com/mewledger/ledger/client v0.0.0\n\n" +
		"replace (\n\tgithub.com/mewledger/ledger/client => " + clientDir + "\n\tgithub.com/mewledger/ledger/api => " + apiDir + "\n)\n"
	mainGo := `package main

import (
	"fmt"

	"github.com/mewledger/ledger/client"
)

func main() {
	c, err := client.New(client.DefaultAPI, client.WithDefaultSpace("team-a"))
	fmt.Println(c != nil, err)
}
`
	for name, text := range map[string]string{"go.mod": goMod, "main.go": mainGo} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("build", "-o", filepath.Join(dir, "consumer"), ".")
	mods := run("list", "-m", "all")
	for _, server := range []string{"nats-server", "pebble", "prometheus", "zerolog", "nats.go"} {
		if strings.Contains(mods, server) {
			t.Errorf("the consumer's module graph holds %s:\n%s", server, mods)
		}
	}
	for _, want := range []string{"github.com/mewledger/ledger/client", "github.com/mewledger/ledger/api"} {
		if !strings.Contains(mods, want) {
			t.Errorf("the consumer's module graph lacks %s:\n%s", want, mods)
		}
	}
}
