package bridge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection states (the state label of ledger_bridge_state).
const (
	StateConnecting   = "connecting"   // dialling and joining
	StateJoined       = "joined"       // welcome received, recording
	StateDisconnected = "disconnected" // waiting to reconnect
	StateFollowing    = "following"    // reading the gateway's history file
	StateStopped      = "stopped"
	StateEvicted      = "evicted" // another participant took the bridge's id; rejoining
)

var states = []string{StateConnecting, StateJoined, StateDisconnected, StateFollowing, StateStopped, StateEvicted}

// Metrics are the bridge's Prometheus series (prefixed ledger_bridge_):
//
//	envelopes_total{bridge,kind,result}   frames received, by kind label (KindLabel) and result
//	                                      (appended, duplicate, refused, failed, skipped, dropped)
//	state{bridge,state}                   1 for the bridge's current connection state, 0 for the others
//	gaps_total{bridge}                    recording gaps reported to the ledger
//	gap_report_errors_total{bridge}       gap reports the ledger did not take (retried)
//	echo_seconds{bridge}                  round trip of the echo check (the bridge's own message
//	                                      through the gateway, sent after a silence)
//
// A nil *Metrics records nothing. Its methods are safe for concurrent use.
type Metrics struct {
	envelopes *prometheus.CounterVec
	state     *prometheus.GaugeVec
	gaps      *prometheus.CounterVec
	gapErrs   *prometheus.CounterVec
	echoes    *prometheus.HistogramVec
}

// NewMetrics returns the bridge metrics registered on reg (the ledger's
// registry inside `ledger serve`, a registry of its own for `ledger
// bridge mew --http`). Several bridges share one Metrics (label bridge).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		envelopes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ledger", Subsystem: "bridge", Name: "envelopes_total",
			Help: "Frames a MEW bridge received, by kind and result (appended, duplicate, refused, failed, skipped, dropped).",
		}, []string{"bridge", "kind", "result"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "ledger", Subsystem: "bridge", Name: "state",
			Help: "1 for the MEW bridge's current connection state (connecting, joined, disconnected, following, stopped, evicted).",
		}, []string{"bridge", "state"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ledger", Subsystem: "bridge", Name: "gaps_total",
			Help: "Recording gaps (disconnections, evictions) a MEW bridge reported to the ledger.",
		}, []string{"bridge"}),
		gapErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ledger", Subsystem: "bridge", Name: "gap_report_errors_total",
			Help: "Gap reports the ledger did not take (retried until it does).",
		}, []string{"bridge"}),
		echoes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ledger", Subsystem: "bridge", Name: "echo_seconds",
			Help:    "Round trip of the echo check: the bridge's own message through the MEW gateway, sent after a silence (eviction check).",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1},
		}, []string{"bridge"}),
	}
	for _, c := range []prometheus.Collector{m.envelopes, m.state, m.gaps, m.gapErrs, m.echoes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register makes a bridge's counters exist at 0 (a scrape shows the
// series before the first gap).
func (m *Metrics) register(bridge string) {
	if m == nil {
		return
	}
	m.gaps.WithLabelValues(bridge).Add(0)
	m.gapErrs.WithLabelValues(bridge).Add(0)
}

func (m *Metrics) frame(bridge, kind, result string) {
	if m == nil {
		return
	}
	m.envelopes.WithLabelValues(bridge, kind, result).Inc()
}

func (m *Metrics) frames(bridge, kind, result string, n int) {
	if m == nil {
		return
	}
	m.envelopes.WithLabelValues(bridge, kind, result).Add(float64(n))
}

func (m *Metrics) setState(bridge, state string) {
	if m == nil {
		return
	}
	for _, s := range states {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(bridge, s).Set(v)
	}
}

func (m *Metrics) gap(bridge string) {
	if m == nil {
		return
	}
	m.gaps.WithLabelValues(bridge).Inc()
}

func (m *Metrics) gapError(bridge string) {
	if m == nil {
		return
	}
	m.gapErrs.WithLabelValues(bridge).Inc()
}

func (m *Metrics) echo(bridge string, d time.Duration) {
	if m == nil {
		return
	}
	m.echoes.WithLabelValues(bridge).Observe(d.Seconds())
}
