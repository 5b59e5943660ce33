package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// documentedMetric is a series name in docs/api.md's Metrics section.
var documentedMetric = regexp.MustCompile("`(ledger_[a-z_]+)")

// scrape returns /metrics of the ledger at base.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestMetricsDocumentedFromTheStart: every series docs/api.md names is on
// /metrics of a fresh ledger, before any append, refusal or error (label
// sets initialised at zero), and an event stream (/v1/watch) stays out of
// the request-duration histogram.
func TestMetricsDocumentedFromTheStart(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/api.md has no ## Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := map[string]bool{}
	for _, m := range documentedMetric.FindAllStringSubmatch(section, -1) {
		names[m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("docs/api.md's Metrics section names %d series: %v", len(names), names)
	}
	a := apptest.Start(t)
	<-a.Ready()
	out := scrape(t, a.HTTPURL())
	has := func(name string) bool {
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			l := sc.Text()
			if !strings.HasPrefix(l, "#") && (strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"_bucket{")) {
				return true
			}
		}
		return false
	}
	for n := range names {
		if !has(n) {
			t.Errorf("%s (docs/api.md) is not on /metrics of a fresh ledger", n)
		}
	}
	for _, want := range []string{`ledger_append_errors_total{path="submit"} 0`, `ledger_events_refused_total{code="not_json",path="http"} 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A watch stream, opened and left: not a request duration.
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.HTTPURL()+"/v1/watch", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("/v1/watch: %v %v", resp, err)
	}
	cancel()
	resp.Body.Close()
	// A bounded request, to see that requests are recorded at all.
	if r, err := http.Get(a.HTTPURL() + "/v1/stats"); err != nil {
		t.Fatal(err)
	} else {
		r.Body.Close()
	}
	deadline := testctx.Deadline(t)
	for {
		out = scrape(t, a.HTTPURL())
		if strings.Contains(out, `ledger_http_request_duration_seconds_count{route="GET /v1/stats",status="200"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/stats not recorded:\n%s", grep(out, "http_request_duration_seconds_count"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(out, `route="GET /v1/watch"`) {
		t.Errorf("the watch stream is in the request-duration histogram:\n%s", grep(out, "GET /v1/watch"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestNATSMonitor: NATSMonitor serves the embedded server's monitoring
// endpoint (what nats-surveyor and the Prometheus NATS exporter scrape),
// named in the address file; by default there is none; it is refused with
// external NATS servers and with a bad address.
func TestNATSMonitor(t *testing.T) {
	a := apptest.Start(t, func(o *app.Options) { o.NATSMonitor = "127.0.0.1:0" })
	<-a.Ready()
	mon := a.NATSServer().MonitorURL()
	if !strings.HasPrefix(mon, "http://127.0.0.1:") {
		t.Fatalf("MonitorURL %q", mon)
	}
	for _, path := range []string{"/varz", "/jsz", "/healthz"} {
		resp, err := http.Get(mon + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (path == "/varz" && !strings.Contains(string(b), `"server_id"`)) {
			t.Errorf("%s: %d %.200s", path, resp.StatusCode, b)
		}
	}
	var addr api.Addr
	if b, err := os.ReadFile(a.Options().AddrFile()); err != nil || json.Unmarshal(b, &addr) != nil || addr.NATSMonitor != mon {
		t.Errorf("address file: %+v (%v), want nats_monitor %s", addr, err, mon)
	}

	plain := apptest.Start(t)
	<-plain.Ready()
	if u := plain.NATSServer().MonitorURL(); u != "" {
		t.Errorf("monitoring served by default: %s", u)
	}
	for _, o := range []app.Options{
		{NATSMonitor: "8222"},
		{NATSMonitor: "127.0.0.1:70000"},
		{NATSMonitor: "127.0.0.1:8222", NATSURLs: []string{"nats://127.0.0.1:4222"}},
	} {
		o.Logger = apptest.Options(t).Logger
		if err := o.EnsureDefaults().Validate(); !errors.Is(err, app.ErrOptions) || !strings.Contains(err.Error(), "monitor") {
			t.Errorf("%+v: %v, want ErrOptions naming the monitor", o, err)
		}
	}
}
