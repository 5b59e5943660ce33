package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// What callers hold (issue 36 item 3): one gauge, ledger_held{kind}, read
// at scrape time from the component that counts each kind. One series per
// kind, never per caller (a label per token or address would grow without
// bound under the very pressure it is meant to show).
//
//	held{kind}                    what callers hold now, by kind (HeldKinds)
//	as_of_folds_total             as-of projections folded (a read of a point not folded yet)
//	as_of_reuses_total            as-of reads answered from a fold already made

// Kinds of ledger_held.
const (
	HeldHolds            = "holds"             // requests waiting on a body, a min_seq wait or a watch
	HeldStreams          = "streams"           // open streams (/v1/watch, /mcp)
	HeldMCPSessions      = "mcp_sessions"      // MCP sessions
	HeldMCPSubscriptions = "mcp_subscriptions" // MCP resource subscriptions
	HeldMCPWatchers      = "mcp_watchers"      // watch streams serving the subscriptions
	HeldAsOfFolds        = "as_of_folds"       // as-of folds in hand (waiting or folding)
	HeldAsOfCached       = "as_of_cached"      // as-of projections kept for reuse
)

// HeldKinds are the kinds of ledger_held, each on /metrics from the first
// scrape (0 until its source is set).
var HeldKinds = []string{HeldHolds, HeldStreams, HeldMCPSessions, HeldMCPSubscriptions, HeldMCPWatchers, HeldAsOfFolds, HeldAsOfCached}

var heldDesc = prometheus.NewDesc(Namespace+"_held", "What callers hold now, by kind: waiting requests (holds), streams, MCP sessions, subscriptions and their watchers, as-of folds in hand and kept.", []string{"kind"}, nil)

type heldCollector struct {
	mu sync.Mutex
	fs map[string]func() int
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) { ch <- heldDesc }

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range HeldKinds {
		v := 0
		if f := c.fs[k]; f != nil {
			v = f()
		}
		ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(v), k)
	}
}

// SetHeld sets the source of ledger_held{kind}: f is called at scrape
// time and must be quick and safe for concurrent use.
func (m *Metrics) SetHeld(kind string, f func() int) {
	if m == nil {
		return
	}
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	m.held.fs[kind] = f
}

// AsOfFolded counts one as-of projection folded.
func (m *Metrics) AsOfFolded() {
	if m == nil {
		return
	}
	m.asOfFolds.Inc()
}

// AsOfReused counts one as-of read answered from a fold already made.
func (m *Metrics) AsOfReused() {
	if m == nil {
		return
	}
	m.asOfReuses.Inc()
}

func (m *Metrics) registerHeld() {
	m.held = &heldCollector{fs: map[string]func() int{}}
	m.asOfFolds = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "as_of_folds_total",
		Help: "As-of projections folded (a time-travel read of a point not folded yet).",
	})
	m.asOfReuses = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "as_of_reuses_total",
		Help: "As-of reads answered from a projection already folded for their point.",
	})
	m.reg.MustRegister(m.held, m.asOfFolds, m.asOfReuses)
}
