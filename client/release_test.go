package client_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// releaseVersion is the version this test releases the client at into its
// file-system proxy. The api version is the one client/go.mod requires:
// a release tags api/<that version> first (docs/client.md, "Releases").
const releaseVersion = "v0.1.0"

// TestGoGetFromRelease: an integrator's throwaway module runs a plain `go
// get github.com/mewledger/ledger/client@VERSION` (no replace directive)
// against a file-system GOPROXY holding the api and client modules as a
// tagged release would publish them (the zips built from this tree with
// golang.org/x/mod/zip, as the module proxy builds them from the tags),
// builds a program that uses the client, and its module graph holds none
// of the server's dependencies.
func TestGoGetFromRelease(t *testing.T) {
	clientDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	apiDir := filepath.Join(filepath.Dir(clientDir), "api")
	gomod, err := os.ReadFile(filepath.Join(clientDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	var apiVersion string
	for _, r := range mf.Require {
		if r.Mod.Path == "github.com/mewledger/ledger/api" {
			apiVersion = r.Mod.Version
		}
	}
	if !strings.HasPrefix(apiVersion, "v") || apiVersion == "v0.0.0" {
		t.Fatalf("client/go.mod requires api %q: a release needs a real api version", apiVersion)
	}

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	publish(t, proxy, module.Version{Path: "github.com/mewledger/ledger/api", Version: apiVersion}, apiDir)
	publish(t, proxy, module.Version{Path: "github.com/mewledger/ledger/client", Version: releaseVersion}, clientDir)

	consumer := filepath.Join(tmp, "consumer")
	if err := os.MkdirAll(consumer, 0o755); err != nil {
		t.Fatal(err)
	}
	mainGo := `package main

import (
	"errors"
	"fmt"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

func main() {
	c, err := client.New(client.DefaultAPI, client.WithDefaultSpace("team-a"))
	fmt.Println(c != nil, err, errors.Is(&api.Error{Status: 404}, api.ErrNotFound))
}
`
	for name, text := range map[string]string{
		"go.mod":  "module example.com/consumer\n\ngo 1.26\n",
		"main.go": mainGo,
	} {
		if err := os.WriteFile(filepath.Join(consumer, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	upstream := os.Getenv("GOPROXY")
	if upstream == "" || upstream == "off" {
		upstream = "https://proxy.golang.org"
	}
	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+upstream,
		"GONOSUMDB=github.com/mewledger", "GONOSUMCHECK=1", "GOFLAGS=-modcacherw",
		"GOWORK=off", "GOMODCACHE="+filepath.Join(tmp, "modcache"))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = consumer
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("get", "github.com/mewledger/ledger/client@"+releaseVersion)
	run("mod", "tidy")
	if out := run("run", "."); strings.TrimSpace(out) != "true <nil> true" {
		t.Fatalf("the consumer printed %q", out)
	}
	mods := run("list", "-m", "all")
	for _, want := range []string{"github.com/mewledger/ledger/client " + releaseVersion, "github.com/mewledger/ledger/api " + apiVersion} {
		if !strings.Contains(mods, want) {
			t.Errorf("the consumer's module graph lacks %s:\n%s", want, mods)
		}
	}
	for _, server := range []string{"nats-server", "pebble", "prometheus", "zerolog", "nats.go"} {
		if strings.Contains(mods, server) {
			t.Errorf("the consumer's module graph holds %s:\n%s", server, mods)
		}
	}
}

// publish writes m, zipped from dir, into the file-system proxy at root
// in the GOPROXY protocol's layout (list, .info, .mod, .zip).
func publish(t *testing.T, root string, m module.Version, dir string) {
	t.Helper()
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	vdir := filepath.Join(root, esc, "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(vdir, m.Version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.CreateFromDir(f, m, dir); err != nil {
		t.Fatalf("zip %s: %v", m, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": m.Version, "Time": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	for name, data := range map[string][]byte{
		m.Version + ".mod":  gomod,
		m.Version + ".info": info,
		"list":              []byte(m.Version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
