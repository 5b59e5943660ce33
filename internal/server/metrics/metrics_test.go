package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/metrics"
)

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestSeries(t *testing.T) {
	m := metrics.New(func(context.Context) (uint64, uint64, error) { return 10, 7, nil })
	m.Appended(metrics.PathHTTP, false)
	m.Appended(metrics.PathHTTP, true)
	m.Refused(metrics.PathSubmit, "not_json")
	m.AppendError(metrics.PathHTTPNDJSON)
	m.Folded(5, 3*time.Millisecond)
	m.HTTPRequest("GET /v1/stats", 200, time.Millisecond)
	out := scrape(t, m)
	for _, want := range []string{
		`ledger_events_appended_total{path="http"} 1`,
		`ledger_events_duplicate_total{path="http"} 1`,
		`ledger_events_refused_total{code="not_json",path="submit"} 1`,
		`ledger_append_errors_total{path="http_ndjson"} 1`,
		`ledger_events_folded_total 5`,
		`ledger_build_info{goversion="` + runtime.Version() + `",revision="unknown",version=`,
		`ledger_fold_batch_duration_seconds_count 1`,
		`ledger_projector_lag_events 3`,
		`ledger_stream_seq 10`,
		`ledger_projected_seq 7`,
		`ledger_http_request_duration_seconds_count{route="GET /v1/stats",status="200"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}

	// A failing lag read fails the scrape of that series, not the others.
	bad := metrics.New(func(context.Context) (uint64, uint64, error) { return 0, 0, errors.New("no stream") })
	bad.Folded(1, time.Millisecond)
	rec := httptest.NewRecorder()
	bad.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "ledger_events_folded_total 1") || strings.Contains(rec.Body.String(), "ledger_projector_lag_events") {
		t.Errorf("scrape with a failing lag read: %d %s", rec.Code, rec.Body)
	}

	// A nil *Metrics records nothing and does not panic.
	var none *metrics.Metrics
	none.Appended("x", false)
	none.Refused("x", "y")
	none.AppendError("x")
	none.Folded(1, time.Second)
	none.HTTPRequest("r", 200, time.Second)
}
