package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

var update = flag.Bool("update", false, "regenerate auth/nats-auth.conf from auth/ledger-auth.yaml")

// files returns the files under deploy/ with one of the extensions.
func files(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "data" || strings.HasPrefix(d.Name(), ".")) && p != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && slices.Contains(exts, filepath.Ext(p)) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every YAML file (all documents of it) and every JSON file parses.
func TestYAMLAndJSONParse(t *testing.T) {
	yamls := files(t, ".yaml", ".yml")
	if len(yamls) < 4 {
		t.Fatalf("only %d YAML files under deploy/: %v", len(yamls), yamls)
	}
	for _, p := range yamls {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		docs := 0
		for {
			var v any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("%s: document %d: %v", p, docs+1, err)
				break
			}
			if v != nil {
				docs++
			}
		}
		if docs == 0 {
			t.Errorf("%s: no YAML document", p)
		}
		t.Logf("%s: %d document(s)", p, docs)
	}
	for _, p := range files(t, ".json") {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Errorf("%s: not valid JSON", p)
		}
	}
}

// Kubernetes manifests have the fields every object needs.
func TestKubernetesManifests(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("k8s", "ledger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	kinds := map[string]bool{}
	for {
		var obj struct {
			APIVersion string         `yaml:"apiVersion"`
			Kind       string         `yaml:"kind"`
			Metadata   map[string]any `yaml:"metadata"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata["name"] == nil {
			t.Errorf("object without apiVersion/kind/metadata.name: %+v", obj)
		}
		kinds[obj.Kind] = true
	}
	for _, k := range []string{"StatefulSet", "Service", "ServiceAccount", "PodDisruptionBudget"} {
		if !kinds[k] {
			t.Errorf("k8s/ledger.yaml has no %s", k)
		}
	}
	var values struct {
		Config struct {
			Cluster struct {
				Enabled  bool `yaml:"enabled"`
				Replicas int  `yaml:"replicas"`
			} `yaml:"cluster"`
			JetStream struct {
				Enabled bool           `yaml:"enabled"`
				Merge   map[string]any `yaml:"merge"`
			} `yaml:"jetstream"`
			Merge map[string]any `yaml:"merge"`
		} `yaml:"config"`
	}
	vb, err := os.ReadFile(filepath.Join("k8s", "nats-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	c := values.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.JetStream.Enabled || c.JetStream.Merge["sync_interval"] != "always" ||
		c.Merge["max_payload"] != appendlog.DefaultMaxMsgSize {
		t.Errorf("nats-values.yaml: %+v", c)
	}
}

// wantNode checks what the ledger needs of a cluster node's options.
func wantNode(t *testing.T, name string, o *server.Options) {
	t.Helper()
	if !o.JetStream || !o.SyncAlways {
		t.Errorf("%s: jetstream %v, sync always %v: want JetStream with sync_interval: always", name, o.JetStream, o.SyncAlways)
	}
	if o.MaxPayload < natsserver.DefaultMaxPayload {
		t.Errorf("%s: max_payload %d < %d (1 MiB envelope + 64 KiB headers)", name, o.MaxPayload, natsserver.DefaultMaxPayload)
	}
	if o.ServerName == "" || o.Cluster.Name != "ledger" || len(o.Routes) != 3 || o.Cluster.Port == 0 {
		t.Errorf("%s: server %q cluster %q port %d routes %v", name, o.ServerName, o.Cluster.Name, o.Cluster.Port, o.Routes)
	}
}

// Every .conf file parses with nats-server's config parser; the cluster
// nodes have JetStream, fsync always, a big enough max_payload and routes
// to all three nodes on distinct ports.
func TestNATSConfigs(t *testing.T) {
	t.Setenv("NATS_NAME", "nats-1") // compose/nats.conf names its node from the environment
	confs := files(t, ".conf")
	if len(confs) < 5 {
		t.Fatalf("only %d .conf files under deploy/: %v", len(confs), confs)
	}
	for _, p := range confs {
		if _, err := conf.ParseFileWithChecks(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	ports := map[int]string{}
	for _, n := range []string{"n1", "n2", "n3"} {
		p := filepath.Join("cluster", n+".conf")
		o, err := server.ProcessConfigFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		wantNode(t, p, o)
		if o.ServerName != n {
			t.Errorf("%s: server_name %q", p, o.ServerName)
		}
		for _, port := range []int{o.Port, o.Cluster.Port, o.HTTPPort} {
			if other, dup := ports[port]; dup {
				t.Errorf("%s: port %d also used by %s", p, port, other)
			}
			ports[port] = p
		}
		if o.Host != "127.0.0.1" || o.Cluster.Host != "127.0.0.1" {
			t.Errorf("%s: listens on %q / %q, want loopback", p, o.Host, o.Cluster.Host)
		}
	}
	o, err := server.ProcessConfigFile(filepath.Join("compose", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	wantNode(t, "compose/nats.conf", o)
	if o.ServerName != "nats-1" || len(o.Users)+len(o.Nkeys) == 0 {
		t.Errorf("compose/nats.conf: server %q, %d users, %d nkeys (want the example's users included)", o.ServerName, len(o.Users), len(o.Nkeys))
	}
}

// auth/nats-auth.conf is exactly what the ledger generates from
// auth/ledger-auth.yaml (go test ./deploy -update rewrites it).
func TestAuthExampleUpToDate(t *testing.T) {
	c, err := authcfg.Load(filepath.Join("auth", "ledger-auth.yaml"))
	if err != nil {
		t.Fatalf("the worked example does not load: %v", err)
	}
	want := c.NATSConfig("")
	p := filepath.Join("auth", "nats-auth.conf")
	if *update {
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./deploy -run TestAuthExampleUpToDate -update", p)
	}
	agents, spaces := 0, map[string]bool{}
	for _, a := range c.NATS.Agents {
		agents++
		for _, s := range a.Spaces {
			spaces[s] = true
		}
	}
	if agents != 3 || len(spaces) != 2 || len(c.NATS.Auditors) != 1 || len(c.NATS.Gateways) != 1 || len(c.HTTP.Tokens) == 0 {
		t.Errorf("the worked example should have three agents in two spaces, an auditor, a gateway and API tokens")
	}
	// Its example secrets match it: the HTTP tokens hash to the configured
	// hashes, the agents' passwords to theirs.
	for _, tok := range c.HTTP.Tokens {
		b, err := os.ReadFile(filepath.Join("auth", "example-secrets", tok.Name+".token"))
		if err != nil {
			t.Fatal(err)
		}
		if h := httpauth.HashToken(strings.TrimSpace(string(b))); h != tok.SHA256 {
			t.Errorf("token %s: example secret hashes to %s, config has %s", tok.Name, h, tok.SHA256)
		}
	}
}

// The worked example works: a real server with the generated users
// accepts every principal with its example secret, and confines them.
func TestAuthExampleConnects(t *testing.T) {
	c, err := authcfg.Load(filepath.Join("auth", "ledger-auth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = filepath.Join("auth", "nats-auth.conf")
	s := natstest.StartWith(t, o)
	secret := func(name string) string {
		b, err := os.ReadFile(filepath.Join("auth", "example-secrets", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	nkey := func(file string) nats.Option {
		kp, err := nkeys.FromSeed([]byte(secret(file)))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		return nats.Nkey(pub, kp.Sign)
	}
	svcOpts, err := c.ServiceConnectOptions()
	if err != nil {
		t.Fatal(err)
	}
	_, svc := natstest.ConnectURL(t, s.ClientURL(), svcOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := appendlog.EnsureStream(ctx, svc, appendlog.StreamOptions{}); err != nil {
		t.Fatalf("service: %v", err)
	}
	users := map[string]nats.Option{
		"bob":   nkey("bob.nk"),
		"carol": nkey("carol.nk"),
		"audit": nkey("audit.nk"),
	}
	// Password users: the example's bcrypt cost (11) takes ~0.1 s to check,
	// but seconds under the race detector, and nats.go gives up on a
	// connection whose CONNECT takes over 2 s (the server's first PING
	// arrives before its PONG). Where bcrypt is that slow, check the
	// example passwords against their hashes directly instead.
	passwords := map[string]string{"alice": c.NATS.Agents[0].Password, "gateway": c.NATS.Gateways[0].Password}
	for user, hash := range passwords {
		pw := secret(user + ".password")
		start := time.Now()
		if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)); err != nil {
			t.Fatalf("%s: the example password does not match its hash", user)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Logf("%s: bcrypt took %v here; not connecting with it", user, d)
			continue
		}
		users[user] = nats.UserInfo(user, pw)
	}
	// A fixed order, the auditor last: it reads what the agents published
	// (ranging over the map let the auditor go first, one run in three,
	// and find no message 1).
	order := []string{"alice", "bob", "carol", "gateway", "audit"}
	published := 0
	for _, user := range order {
		cred, ok := users[user]
		if !ok {
			continue
		}
		nc, js := natstest.ConnectURL(t, s.ClientURL(), cred, authcfg.ClientInbox(user))
		if !nc.IsConnected() {
			t.Fatalf("%s not connected", user)
		}
		switch user {
		case "alice", "bob", "carol":
			id, space := user, "research"
			if user == "carol" {
				id, space = "carol@ops", "ops"
			}
			raw := []byte(`{"protocol":"mew/v0.4","id":"p-` + user + `","from":"` + id + `","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`)
			subj := subjects.Event{Space: space, Key: "p-" + user, Type: "proposal", Sender: id}.String()
			if _, err := js.Publish(ctx, subj, raw); err != nil {
				t.Errorf("%s publishing as itself: %v", user, err)
			} else {
				published++
			}
		case "audit":
			if published == 0 {
				t.Fatal("no agent published; the auditor has nothing to read")
			}
			st, err := js.Stream(ctx, subjects.StreamName)
			if err != nil {
				t.Errorf("auditor stream info: %v", err)
			} else if m, err := st.GetMsg(ctx, 1); err != nil {
				t.Errorf("auditor read: %v", err)
			} else if !bytes.Contains(m.Data, []byte(`"kind":"mcp/proposal"`)) {
				t.Errorf("auditor read message 1 = %s, want an agent's proposal", m.Data)
			}
		}
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("alice", "not-her-password")); err == nil {
		nc.Close()
		t.Fatal("wrong password accepted")
	}
}
