package authcfg_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// TestBridgePrincipal: a bridge user (ledger bridge mew --history
// --nats-url) may publish events of its spaces under any sender but the
// ledger's own, submit requests and gap reports there, and nothing in
// other spaces; checked on a real server running the generated
// configuration.
func TestBridgePrincipal(t *testing.T) {
	f := newFixture(t)
	pw, hash, err := authcfg.NewPassword(bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.doc()
	at(doc, "nats")["bridges"] = []any{map[string]any{"user": "recorder", "password": hash, "spaces": []any{"research"}}}
	cfg, err := authcfg.Load(f.write(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	var bp *authcfg.Principal
	for _, p := range cfg.Principals() {
		if p.User == "recorder" {
			bp = &p
		}
	}
	if bp == nil || bp.Kind != authcfg.KindBridge {
		t.Fatalf("no bridge principal: %+v", bp)
	}
	conf := filepath.Join(t.TempDir(), "nats-auth.conf")
	if err := cfg.WriteNATSConfig(conf, ""); err != nil {
		t.Fatal(err)
	}
	o := natstest.Options(t)
	o.ConfigFile = conf
	r := &authRig{f: f, cfg: cfg, srv: natstest.StartWith(t, o)}
	svcOpts, err := cfg.ServiceConnectOptions()
	if err != nil {
		t.Fatal(err)
	}
	r.svc = r.connect(t, "ledger", svcOpts...)
	if _, err := appendlog.EnsureStream(ctxFor(t, 30*time.Second), r.svc.js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := r.connect(t, "recorder", nats.UserInfo("recorder", pw))

	// Any sender of its space: what the gateway's log says mallory sent.
	rec.mustPublish(t, evSubject("research", "w1", "withdraw", "mallory"), env("w1", "coder", "mcp/withdraw", "p1"))
	rec.noViolation(t)
	// Not as the ledger, not in another space.
	rec.refused(t, evSubject("research", "x1", "note", ledger.LedgerSender), env("x1", ledger.LedgerSender, "chat", "p1"))
	rec.refused(t, evSubject("ops", "x2", "proposal", "mallory"), env("x2", "mallory", "mcp/proposal"))
	// Gap reports and submit requests of its space are allowed (nobody
	// serves them here: no responders, no violation).
	for _, subj := range []string{subjects.Gap("research"), subjects.Submit("research")} {
		if _, err := rec.nc.Request(subj, []byte(`{}`), refusalWait); err == nil {
			t.Fatalf("%s answered", subj)
		}
		rec.noViolation(t)
	}
	if _, err := rec.nc.Request(subjects.Gap("ops"), []byte(`{}`), refusalWait); err == nil {
		t.Fatal("gap report into another space answered")
	}
	rec.expectViolation(t, "publish", subjects.Gap("ops"))

	// A bridge without spaces is refused.
	at(doc, "nats")["bridges"] = []any{map[string]any{"user": "recorder", "password": hash}}
	if _, err := authcfg.Load(f.write(t, doc)); err == nil {
		t.Fatal("a bridge without spaces was accepted")
	}
}
