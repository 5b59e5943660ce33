package bridge

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves a standalone bridge's HTTP endpoints (`ledger bridge mew
// --http ADDR`): GET /healthz — 200 {"status":"ok",...Health} while the
// bridge is joined (or following its history file), else 503 with
// "status":"evicted" from the moment another participant is found to
// hold the bridge's id until it has joined again, "degraded" otherwise,
// and the state — and GET /metrics (reg in the
// Prometheus format).
func Handler(b *Bridge, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		h := b.Health()
		status, code := "ok", http.StatusOK
		switch h.State {
		case StateJoined, StateFollowing:
		case StateEvicted:
			status, code = StateEvicted, http.StatusServiceUnavailable
		default:
			status, code = "degraded", http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(struct {
			Status string `json:"status"`
			Health
		}{status, h})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
