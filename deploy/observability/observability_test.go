package observability_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/sumdb/note"

	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// promtool runs promtool with args in this directory; the test fails (it
// does not skip) when promtool is missing: `make tools` installs it
// (Debian's prometheus package).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (Debian: apt-get install prometheus; `make tools` does): %v", err)
	}
	out, err := exec.CommandContext(testctx.Context(t), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestRules: the rules parse and pass their unit tests.
func TestRules(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
	promtool(t, "test", "rules", "alerts_test.yml")
}

// metricName matches the metric names an expression can use from the
// binary (Prometheus's own series, such as up, are not the binary's).
var metricName = regexp.MustCompile(`\b(?:ledger|go|process)_[a-zA-Z0-9_]+\b`)

// ruleMetrics returns the metrics alerts.yml's expressions name.
func ruleMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names = append(names, metricName.FindAllString(r.Expr, -1)...)
		}
	}
	return names
}

// dashboardMetrics returns the metrics the dashboard's queries name
// (panels' targets and the variables' queries).
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("ledger-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Query any }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			names = append(names, metricName.FindAllString(tg.Expr, -1)...)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			names = append(names, metricName.FindAllString(q, -1)...)
		}
	}
	return names
}

// exported scrapes url and returns the series names it exports (a
// histogram's _bucket, _sum and _count included).
func exported(t *testing.T, url string) (map[string]bool, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(testctx.Context(t), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	names := map[string]bool{}
	for _, l := range strings.Split(string(body), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
			if f[3] == "histogram" || f[3] == "summary" {
				names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
			}
			if f[3] == "histogram" {
				names[f[2]+"_bucket"] = true
			}
		}
	}
	return names, string(body)
}

// TestMetricsExist: every metric the rules and the dashboard name is on a
// running ledger's /metrics, with a MEW bridge recording inside it (its
// metrics on the ledger's registry, as `ledger serve --bridge-mew-config`
// runs it), and a witness configured (one that does not answer: its
// metrics are there all the same).
func TestMetricsExist(t *testing.T) {
	_, wkey, err := note.GenerateKey(rand.Reader, "witness.example/obs")
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.Witnesses = []witness.Witness{{VKey: wkey, URL: "http://127.0.0.1:1"}}
		o.WitnessBackoff = 50 * time.Millisecond
	})
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	m, err := bridge.NewMetrics(a.Metrics().Registry())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(bridge.Options{Gateway: gw.URL(), MEWSpace: "m", Token: "t", Space: "default", Participant: "ledger-recorder",
		Sink: bridge.AppenderSink{Appender: a.Appender()}, Metrics: m, Logger: natstest.Logger(t), ProbeInterval: -1,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := b.Run(ctx); err != nil {
			t.Errorf("bridge: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	if err := gw.WaitJoins(testctx.Context(t), "m", "ledger-recorder", 1); err != nil {
		t.Fatal(err)
	}
	gw.Broadcast("m", []byte(`{"protocol":"mew/v0.4","id":"obs-1","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file"}}}`))

	var have map[string]bool
	var body string
	testctx.Until(t, 50*time.Millisecond, func() bool {
		have, body = exported(t, a.HTTPURL()+"/metrics")
		return have["ledger_bridge_envelopes_total"] && have["ledger_projector_lag_events"] && have["ledger_witness_alarm"]
	}, func() string { return "the bridge's frame or the lag not on /metrics:\n" + body })

	for _, src := range []struct {
		file  string
		names []string
	}{{"alerts.yml", ruleMetrics(t)}, {"ledger-dashboard.json", dashboardMetrics(t)}} {
		if len(src.names) < 5 {
			t.Fatalf("%s: only %d metric names found: %v", src.file, len(src.names), src.names)
		}
		var missing []string
		for _, n := range src.names {
			if !have[n] && !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			var all []string
			for n := range have {
				all = append(all, n)
			}
			sort.Strings(all)
			t.Errorf("%s names metrics the ledger does not export: %v\nexported: %v", src.file, missing, all)
		}
	}
}
