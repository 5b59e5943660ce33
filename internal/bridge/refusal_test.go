package bridge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// flakySink is a real sink whose first failures batches fail as if the
// ledger did not answer (a fault injector in front of the real ledger).
type flakySink struct {
	bridge.Sink
	failures atomic.Int32
}

func (f *flakySink) AppendBatch(ctx context.Context, space string, batch []bridge.Envelope) ([]api.AppendResult, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, errors.New("injected: the ledger did not answer")
	}
	return f.Sink.AppendBatch(ctx, space, batch)
}

func scrape(t *testing.T, b *bridge.Bridge, reg *prometheus.Registry, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	bridge.Handler(b, reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// TestRefusalsAndRetries: frames the ledger refuses are logged, counted
// and skipped past; stream, binary-free junk and oversize frames are
// counted; an append the ledger does not answer is retried until it is
// stored, once; /healthz and /metrics say so.
func TestRefusalsAndRetries(t *testing.T) {
	a := apptest.Start(t)
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	reg := prometheus.NewRegistry()
	m, err := bridge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	sink := &flakySink{Sink: bridge.AppenderSink{Appender: a.Appender()}}
	sink.failures.Store(3)
	b := startBridge(t, bridge.Options{Gateway: gw.URL(), MEWSpace: "m", Token: "t", Space: "refusals", Sink: sink, Metrics: m, ProbeInterval: -1})
	waitJoined(t, gw, b, "m", 1)
	big := `{"protocol":"mew/v0.4","id":"big","from":"a","kind":"chat","correlation_id":["p"],"payload":{"text":"` + strings.Repeat("x", 1<<20) + `"}}`
	for _, f := range []string{
		`{"protocol":"mew/v0.4","id":"p1","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`,
		`{"protocol":"mew/v0.4","id":"bad1","kind":"mcp/proposal","payload":{"method":"tools/call"}}`, // no from: refused
		`{"protocol":"mew/v9","id":"bad2","from":"a","kind":"mcp/withdraw","correlation_id":["p1"],"payload":{}}`,
		`#stream-1#chunk`,
		`{"protocol":"mew/v0.4","kind":"system/error","payload":{"error":"x","code":"VALIDATION_ERROR"}}`,
		big,
		`{"protocol":"mew/v0.4","id":"gap:fake/1","from":"coder","kind":"mcp/withdraw","correlation_id":"p1","payload":{"reason":"other"}}`,
		`{"protocol":"mew/v0.4","id":"w1","from":"coder","kind":"mcp/withdraw","correlation_id":"p1","payload":{"reason":"other"}}`,
	} {
		gw.Broadcast("m", []byte(f))
	}
	waitFrames(t, b, 9) // the welcome and the 8 frames
	h := b.Health()
	if h.Appended != 2 || h.LastEnvelope != "w1" {
		t.Errorf("health %+v: want p1 and w1 appended", h)
	}
	code, body := scrape(t, b, reg, "/metrics")
	for _, want := range []string{
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="mcp/proposal",result="appended"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="mcp/proposal",result="refused"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="mcp/withdraw",result="refused"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="mcp/withdraw",result="appended"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="mcp/withdraw",result="reserved"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="#stream#",result="skipped"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="system/error",result="skipped"} 1`,
		`ledger_bridge_envelopes_total{bridge="ledger-recorder",kind="oversize",result="refused"} 1`,
		`ledger_bridge_state{bridge="ledger-recorder",state="joined"} 1`,
		`ledger_bridge_gaps_total{bridge="ledger-recorder"} 0`,
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, body := scrape(t, b, reg, "/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("/healthz %d %s", code, body)
	}
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := cl.Stats(context.Background(), apitest.ReadOptions{Space: "refusals", MinSeq: caughtUp(t, cl)})
	if err != nil || st.Events != 2 {
		t.Errorf("stats %+v %v: want 2 events (each retried append stored once)", st, err)
	}
}
