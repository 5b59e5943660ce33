package authcfg_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/subjects"
)

// fixture holds fresh credentials for a test configuration.
type fixture struct {
	dir string
	// secrets by user: password (password users) or seed (nkey users)
	passwords map[string]string
	seeds     map[string]string
	pubs      map[string]string
	hashes    map[string]string
}

// newFixture makes credentials for the users of baseYAML: passwords for
// alice and gateway, nkeys for the others, and writes the service seed.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), passwords: map[string]string{}, seeds: map[string]string{}, pubs: map[string]string{}, hashes: map[string]string{}}
	for _, u := range []string{"ledger", "bob", "carol", "audit"} {
		pub, seed, err := authcfg.NewUserNkey()
		if err != nil {
			t.Fatal(err)
		}
		f.pubs[u], f.seeds[u] = pub, seed
	}
	for _, u := range []string{"alice", "gateway"} {
		pw, hash, err := authcfg.NewPassword(bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		f.passwords[u], f.hashes[u] = pw, hash
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "secrets", "ledger.nk"), []byte(f.seeds["ledger"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// doc returns the fixture's configuration as a YAML tree, to mutate.
func (f *fixture) doc() map[string]any {
	return map[string]any{
		"version": 1,
		"nats": map[string]any{
			"service": map[string]any{"user": "ledger", "nkey": f.pubs["ledger"], "seed_file": "secrets/ledger.nk"},
			"agents": []any{
				map[string]any{"id": "alice", "password": f.hashes["alice"], "spaces": []any{"research"}, "read": []any{"research"}},
				map[string]any{"id": "bob", "nkey": f.pubs["bob"], "spaces": []any{"research"}},
				map[string]any{"id": "carol@ops", "user": "carol", "nkey": f.pubs["carol"], "spaces": []any{"ops"}},
			},
			"auditors": []any{map[string]any{"user": "audit", "nkey": f.pubs["audit"]}},
			"gateways": []any{map[string]any{"user": "gateway", "password": f.hashes["gateway"], "spaces": []any{"research", "ops"}}},
		},
	}
}

// write marshals doc into the fixture directory and returns the path.
func (f *fixture) write(t testing.TB, doc map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.dir, "ledger-auth.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) load(t testing.TB) *authcfg.Config {
	t.Helper()
	c, err := authcfg.Load(f.write(t, f.doc()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// path walks a YAML tree ("nats.agents.1") and returns the map there.
func at(doc map[string]any, path string) map[string]any {
	cur := any(doc)
	for _, k := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			i := 0
			for _, ch := range k {
				i = i*10 + int(ch-'0')
			}
			cur = c[i]
		}
	}
	return cur.(map[string]any)
}

func TestLoadValid(t *testing.T) {
	f := newFixture(t)
	c := f.load(t)
	if !c.NATSEnabled() || c.Version != authcfg.Version {
		t.Fatalf("config: %+v", c)
	}
	if got := c.NATS.Agents[0].User; got != "alice" {
		t.Errorf("agent user defaults to the id: %q", got)
	}
	if got := c.NATS.Service.Durables; !slices.Equal(got, []string{authcfg.DefaultDurable}) {
		t.Errorf("durables default: %v", got)
	}
	ps := c.Principals()
	if len(ps) != 6 || ps[0].Kind != authcfg.KindService {
		t.Fatalf("principals: %+v", ps)
	}
	byUser := map[string]authcfg.Principal{}
	for _, p := range ps {
		byUser[p.User] = p
	}
	// Agents: publish only as themselves in their spaces.
	if got, want := byUser["alice"].Perms.PublishAllow, []string{"ledger.research.*.*.alice"}; !slices.Equal(got, want) {
		t.Errorf("alice publish %v, want %v", got, want)
	}
	if got, want := byUser["carol"].Perms.PublishAllow, []string{subjects.AgentPublish("ops", "carol@ops")}; !slices.Equal(got, want) {
		t.Errorf("carol publish %v, want %v", got, want)
	}
	if got, want := byUser["alice"].Perms.SubscribeAllow, []string{"_INBOX.alice.>", "ledger.research.*.*.*"}; !slices.Equal(got, want) {
		t.Errorf("alice subscribe %v, want %v", got, want)
	}
	if got, want := byUser["bob"].Perms.SubscribeAllow, []string{"_INBOX.bob.>"}; !slices.Equal(got, want) {
		t.Errorf("bob subscribe %v, want %v", got, want)
	}
	if got, want := byUser["gateway"].Perms.PublishAllow, []string{"ledger.gap.ops", "ledger.gap.research", "ledger.submit.ops", "ledger.submit.research"}; !slices.Equal(got, want) {
		t.Errorf("gateway publish %v, want %v", got, want)
	}
	svc := byUser["ledger"].Perms
	for _, s := range []string{"$JS.API.STREAM.DELETE.LEDGER", "$JS.API.STREAM.PURGE.LEDGER", "$JS.API.STREAM.MSG.DELETE.LEDGER"} {
		if !slices.Contains(svc.PublishDeny, s) {
			t.Errorf("service may publish %s", s)
		}
	}
	if !svc.AllowResponses || !slices.Contains(svc.SubscribeAllow, subjects.SubmitWildcard) || !slices.Contains(svc.SubscribeAllow, subjects.GapWildcard) {
		t.Errorf("service perms %+v", svc)
	}
	aud := byUser["audit"].Perms
	if !slices.Contains(aud.PublishDeny, "$JS.API.CONSUMER.CREATE.LEDGER.projector") || !slices.Contains(aud.PublishDeny, "$JS.API.CONSUMER.MSG.NEXT.LEDGER.projector") {
		t.Errorf("auditor may touch the projector's durable: %+v", aud)
	}
	for _, p := range ps {
		for _, s := range p.Perms.PublishAllow {
			if s == ">" || s == "$JS.API.STREAM.DELETE.LEDGER" {
				t.Errorf("%s may publish %s", p.User, s)
			}
		}
	}
	opts, err := c.ServiceConnectOptions()
	if err != nil || len(opts) != 1 {
		t.Fatalf("service connect options: %v %v", opts, err)
	}
}

func TestLoadErrors(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.dir, "secrets", "wrong.password"), []byte("not-it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "secrets", "bob.nk"), []byte(f.seeds["bob"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		mutate func(d map[string]any)
		field  string // expected in the error
		msg    string
	}{
		"unknown field": {func(d map[string]any) { at(d, "nats.agents.0")["spaces_typo"] = []any{"x"} }, "", "spaces_typo"},
		"bad version":   {func(d map[string]any) { d["version"] = 7 }, "version", "reads version 1"},
		"plaintext":     {func(d map[string]any) { at(d, "nats.agents.0")["password"] = "hunter2" }, "nats.agents[0].password", "not a bcrypt hash"},
		"bad nkey":      {func(d map[string]any) { at(d, "nats.agents.1")["nkey"] = "UABC" }, "nats.agents[1].nkey", "not an nkey"},
		"seed as nkey":  {func(d map[string]any) { at(d, "nats.agents.1")["nkey"] = f.seeds["bob"] }, "nats.agents[1].nkey", "not an nkey"},
		"both creds":    {func(d map[string]any) { at(d, "nats.agents.1")["password"] = f.hashes["alice"] }, "nats.agents[1]", "both a password and an nkey"},
		"no creds":      {func(d map[string]any) { delete(at(d, "nats.auditors.0"), "nkey") }, "nats.auditors[0]", "needs a password"},
		"dup user":      {func(d map[string]any) { at(d, "nats.auditors.0")["user"] = "bob" }, "nats.auditors[0].user", "already the user of nats.agents[1]"},
		"dup nkey":      {func(d map[string]any) { at(d, "nats.auditors.0")["nkey"] = f.pubs["carol"] }, "nats.auditors[0].nkey", "already the nkey of nats.agents[2]"},
		"bad user":      {func(d map[string]any) { at(d, "nats.auditors.0")["user"] = "a.b" }, "nats.auditors[0].user", "user names are"},
		"id not a user": {func(d map[string]any) { delete(at(d, "nats.agents.2"), "user") }, "nats.agents[2].user", "not usable as a user name"},
		"ledger id": {func(d map[string]any) {
			at(d, "nats.agents.1")["id"] = "ledger"
			at(d, "nats.agents.1")["user"] = "bob"
		}, "nats.agents[1].id", "ledger's own sender"},
		"no spaces":         {func(d map[string]any) { delete(at(d, "nats.agents.1"), "spaces") }, "nats.agents[1].spaces", "at least one space"},
		"dup space":         {func(d map[string]any) { at(d, "nats.agents.1")["spaces"] = []any{"a", "a"} }, "nats.agents[1].spaces[1]", "listed twice"},
		"agent star":        {func(d map[string]any) { at(d, "nats.agents.1")["spaces"] = []any{"*", "x"} }, "nats.agents[1].spaces[0]", "name the spaces"},
		"empty read":        {func(d map[string]any) { at(d, "nats.agents.0")["read"] = []any{""} }, "nats.agents[0].read[0]", "empty space"},
		"same sender":       {func(d map[string]any) { at(d, "nats.agents.1")["id"] = "alice"; at(d, "nats.agents.1")["user"] = "bob" }, "nats.agents[1].spaces[0]", `agent id "alice" in space "research" is also given to user "alice"`},
		"gateway no spaces": {func(d map[string]any) { delete(at(d, "nats.gateways.0"), "spaces") }, "nats.gateways[0].spaces", "at least one space"},
		"gateway star+":     {func(d map[string]any) { at(d, "nats.gateways.0")["spaces"] = []any{"a", "*"} }, "nats.gateways[0].spaces[1]", "must be alone"},
		"no service":        {func(d map[string]any) { at(d, "nats")["service"] = map[string]any{} }, "nats.service.user", "required"},
		"service no seed":   {func(d map[string]any) { delete(at(d, "nats.service"), "seed_file") }, "nats.service.seed_file", "required with an nkey"},
		"service no pwfile": {func(d map[string]any) {
			s := at(d, "nats.service")
			delete(s, "nkey")
			delete(s, "seed_file")
			s["password"] = f.hashes["alice"]
		}, "nats.service.password_file", "required with a password"},
		"service wrong pw": {func(d map[string]any) {
			s := at(d, "nats.service")
			delete(s, "nkey")
			delete(s, "seed_file")
			s["password"], s["password_file"] = f.hashes["alice"], "secrets/wrong.password"
		}, "nats.service.password_file", "does not hold the password"},
		"service seed mismatch": {func(d map[string]any) { at(d, "nats.service")["seed_file"] = "secrets/bob.nk" }, "nats.service.seed_file", "is the seed of " + f.pubs["bob"]},
		"service seed missing":  {func(d map[string]any) { at(d, "nats.service")["seed_file"] = "secrets/none.nk" }, "nats.service.seed_file", "no such file"},
		"auth timeout":          {func(d map[string]any) { at(d, "nats")["auth_timeout"] = "2h" }, "nats.auth_timeout", "up to 1m0s"},
		"bad durable":           {func(d map[string]any) { at(d, "nats.service")["durables"] = []any{"a.b"} }, "nats.service.durables[0]", "not a consumer name"},
		"http bad token": {func(d map[string]any) {
			d["http"] = map[string]any{"tokens": []any{map[string]any{"name": "x", "sha256": "secret", "roles": []any{"auditor"}}}}
		}, "http", "64 hex digits"},
		"nothing": {func(d map[string]any) { delete(d, "nats") }, "", "nothing to authenticate"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := f.doc()
			c.mutate(d)
			_, err := authcfg.Load(f.write(t, d))
			if !errors.Is(err, authcfg.ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			var fe *authcfg.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err %T is not a FieldError", err)
			}
			if fe.Field != c.field && c.field != "" {
				t.Errorf("field %q, want %q (%v)", fe.Field, c.field, err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not say %q", err, c.msg)
			}
			if !strings.Contains(err.Error(), "ledger-auth.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if _, err := authcfg.Load(filepath.Join(f.dir, "nope.yaml")); !errors.Is(err, authcfg.ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}

func TestHTTPOnlyConfig(t *testing.T) {
	c, err := authcfg.Parse([]byte(`
http:
  tokens:
    - {name: a, sha256: "`+strings.Repeat("ab", 32)+`", roles: [auditor, writer]}
  open_metrics: true
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.NATSEnabled() || c.Principals() != nil || !c.HTTP.OpenMetrics || len(c.HTTP.Tokens) != 1 {
		t.Fatalf("config %+v", c)
	}
	if opts, err := c.ServiceConnectOptions(); opts != nil || err != nil {
		t.Fatalf("service options without nats: %v %v", opts, err)
	}
}

// The generated configuration file is what the programmatic users are:
// nats-server parses NATSConfig into exactly ApplyTo's users.
func TestNATSConfigRoundTrip(t *testing.T) {
	f := newFixture(t)
	d := f.doc()
	// Awkward values: an id needing encoding, a space with a dot.
	at(d, "nats.agents.2")["id"] = `carol "the" \ops`
	at(d, "nats.agents.2")["spaces"] = []any{"ops.eu", "ops"}
	at(d, "nats.gateways.0")["spaces"] = []any{"*"}
	at(d, "nats.service")["durables"] = []any{"projector-a", "projector-b"}
	at(d, "nats")["auth_timeout"] = "2.5s"
	c, err := authcfg.Load(f.write(t, d))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "nats-auth.conf")
	if err := c.WriteNATSConfig(conf, ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	parsed, err := server.ProcessConfigFile(conf)
	if err != nil {
		b, _ := os.ReadFile(conf)
		t.Fatalf("nats-server cannot parse the generated file: %v\n%s", err, b)
	}
	var want server.Options
	c.ApplyTo(&want)
	if parsed.AuthTimeout != 2.5 || want.AuthTimeout != 2.5 {
		t.Errorf("auth timeout: parsed %v, ApplyTo %v, want 2.5", parsed.AuthTimeout, want.AuthTimeout)
	}
	if len(parsed.Users) != len(want.Users) || len(parsed.Nkeys) != len(want.Nkeys) {
		t.Fatalf("parsed %d users %d nkeys, want %d and %d", len(parsed.Users), len(parsed.Nkeys), len(want.Users), len(want.Nkeys))
	}
	for i, u := range want.Users {
		p := parsed.Users[i]
		if p.Username != u.Username || p.Password != u.Password || !samePerms(p.Permissions, u.Permissions) {
			t.Errorf("user %d: parsed %+v %+v, want %+v %+v", i, p, p.Permissions, u, u.Permissions)
		}
	}
	for i, u := range want.Nkeys {
		p := parsed.Nkeys[i]
		if p.Nkey != u.Nkey || !samePerms(p.Permissions, u.Permissions) {
			t.Errorf("nkey %d: parsed %+v, want %+v", i, p.Permissions, u.Permissions)
		}
	}
	// carol's quoted id survived as the encoded sender token.
	for _, u := range parsed.Nkeys {
		if u.Nkey == f.pubs["carol"] {
			want := []string{subjects.AgentPublish("ops", `carol "the" \ops`), subjects.AgentPublish("ops.eu", `carol "the" \ops`)}
			slices.Sort(want)
			if !slices.Equal(u.Permissions.Publish.Allow, want) {
				t.Errorf("carol: %v, want %v", u.Permissions.Publish.Allow, want)
			}
		}
	}

	// With an include: relative to the generated file, included first.
	base := filepath.Join(t.TempDir(), "operator.conf")
	if err := os.WriteFile(base, []byte("max_connections: 123\nauthorization { user: x, password: y }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteNATSConfig(conf, base); err != nil {
		t.Fatal(err)
	}
	parsed, err = server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("with include: %v", err)
	}
	if parsed.MaxConn != 123 || len(parsed.Users)+len(parsed.Nkeys) != 6 || parsed.Username != "" {
		t.Fatalf("include: max_conn %d, %d users, %d nkeys, single user %q", parsed.MaxConn, len(parsed.Users), len(parsed.Nkeys), parsed.Username)
	}
}

func samePerms(a, b *server.Permissions) bool {
	norm := func(p *server.Permissions) *server.Permissions {
		if p == nil {
			return &server.Permissions{}
		}
		c := *p
		for _, sp := range []**server.SubjectPermission{&c.Publish, &c.Subscribe} {
			if *sp != nil {
				x := **sp
				if len(x.Allow) == 0 {
					x.Allow = nil
				}
				if len(x.Deny) == 0 {
					x.Deny = nil
				}
				*sp = &x
			}
		}
		return &c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func TestSecretsHelpers(t *testing.T) {
	h, err := authcfg.HashPassword("pw", bcrypt.MinCost)
	if err != nil || bcrypt.CompareHashAndPassword([]byte(h), []byte("pw")) != nil {
		t.Fatalf("HashPassword: %v", err)
	}
	if _, err := authcfg.HashPassword(strings.Repeat("x", 100), bcrypt.MinCost); err == nil {
		t.Fatal("bcrypt accepted a 100-byte password")
	}
	pub, seed, err := authcfg.NewUserNkey()
	if err != nil || !strings.HasPrefix(pub, "U") || !strings.HasPrefix(seed, "SU") {
		t.Fatalf("NewUserNkey: %q %q %v", pub, seed, err)
	}
}
