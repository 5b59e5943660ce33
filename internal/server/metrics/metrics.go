// Package metrics holds the ledger's Prometheus metrics, registered on a
// registry of their own (never the global one) so that several ledgers can
// run in one process (tests, benchmarks).
//
// Series (all prefixed ledger_):
//
//	events_appended_total{path}            envelopes stored by an append path (http, http_ndjson, submit)
//	events_duplicate_total{path}           appends the stream recognised as retries (stored once)
//	events_refused_total{path,code}        envelopes refused before publishing, by refusal code
//	append_errors_total{path}              appends that were valid but not acknowledged
//	events_folded_total                    events folded by the projector
//	fold_batch_duration_seconds            fold + commit time of one projector batch
//	projector_lag_events                   stream last seq minus projected seq (read at scrape time)
//	stream_seq, projected_seq              the two sides of the lag
//	http_request_duration_seconds{route,status}  by ServeMux pattern ("GET /v1/proposals/{id}"); not streams (text/event-stream answers)
//	build_info{version,revision,goversion} 1: the running build (package buildinfo)
//	held{kind}                             what callers hold now, by kind (held.go)
//	as_of_folds_total, as_of_reuses_total  as-of projections folded, reads that reused one
//
// plus the Go runtime and process collectors.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/buildinfo"
)

// Append paths (the path label).
const (
	PathHTTP       = "http"
	PathHTTPNDJSON = "http_ndjson"
	PathSubmit     = "submit"
)

// Namespace prefixes every series.
const Namespace = "ledger"

// LagFunc reads the stream's last sequence and the projection's applied
// sequence. It is called at scrape time with a bounded context.
type LagFunc func(ctx context.Context) (streamSeq, projectedSeq uint64, err error)

// Metrics is the set of ledger metrics. Its methods are safe for concurrent
// use. A nil *Metrics is valid and records nothing, so libraries need not
// check.
type Metrics struct {
	reg *prometheus.Registry

	appended   *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	refused    *prometheus.CounterVec
	appendErrs *prometheus.CounterVec
	folded     prometheus.Counter
	foldBatch  prometheus.Histogram
	httpDur    *prometheus.HistogramVec
	held       *heldCollector // held.go
	asOfFolds  prometheus.Counter
	asOfReuses prometheus.Counter
}

// New returns the metrics registered on a new registry. lag, if not nil,
// feeds the lag gauges at scrape time.
func New(lag LagFunc) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		appended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_appended_total",
			Help: "Envelopes stored in the LEDGER stream, by append path.",
		}, []string{"path"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_duplicate_total",
			Help: "Appends the stream recognised as a retry of an envelope it already stored, by append path.",
		}, []string{"path"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_refused_total",
			Help: "Envelopes refused before publishing, by append path and refusal code.",
		}, []string{"path", "code"}),
		appendErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "append_errors_total",
			Help: "Valid envelopes whose append was not acknowledged (NATS unavailable, timeout), by append path.",
		}, []string{"path"}),
		folded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "events_folded_total",
			Help: "Events folded into the projection.",
		}),
		foldBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "fold_batch_duration_seconds",
			Help:    "Time to fold and commit one projector batch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		httpDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "HTTP request durations by route pattern and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "status"}),
	}
	m.reg.MustRegister(m.appended, m.duplicates, m.refused, m.appendErrs, m.folded, m.foldBatch, m.httpDur,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.initLabels()
	m.registerHeld()
	bi := buildinfo.Get()
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "The running build: module version, VCS revision and Go version as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion},
	}, func() float64 { return 1 }))
	if lag != nil {
		m.reg.MustRegister(&lagCollector{f: lag})
	}
	return m
}

// Paths are the append paths, each of whose series exists from the start.
var Paths = []string{PathHTTP, PathHTTPNDJSON, PathSubmit}

// refusalCodes are the envelope refusal codes whose
// events_refused_total series exist from the start (a kernel rule's code
// appears when first counted).
var refusalCodes = []string{
	api.CodeNotJSON, api.CodeOversize, api.CodeUnknownProtocol, api.CodeMissingField,
	api.CodeWrongType, api.CodeTooLong, api.CodeTooMany, api.CodeBadValue,
	api.CodeNotLifecycle, api.CodeMissingCorrelation, api.CodeReservedKind,
	api.CodeDialectMismatch, api.CodeReservedID, api.CodeReservedSender, api.CodeUnknownField,
}

// initLabels creates the label sets known in advance at zero, so that
// every documented series is on /metrics from the first scrape (a counter
// vector has no series until a label set is used, and rate() of a series
// that appears at 1 misses that first count).
func (m *Metrics) initLabels() {
	for _, p := range Paths {
		m.appended.WithLabelValues(p)
		m.duplicates.WithLabelValues(p)
		m.appendErrs.WithLabelValues(p)
		for _, c := range refusalCodes {
			m.refused.WithLabelValues(p, c)
		}
	}
}

// HTTPRoutes creates the http_request_duration_seconds series of routes
// (status 200) at zero: call it with the mounted routes before serving.
func (m *Metrics) HTTPRoutes(routes []string) {
	if m == nil {
		return
	}
	for _, r := range routes {
		m.httpDur.WithLabelValues(r, "200")
	}
}

// Registry returns the registry, to register more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format. A
// series that cannot be read (the lag, when the stream does not answer) is
// left out and the others are served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// Appended counts one acknowledged append on path (duplicate or not).
func (m *Metrics) Appended(path string, duplicate bool) {
	if m == nil {
		return
	}
	if duplicate {
		m.duplicates.WithLabelValues(path).Inc()
		return
	}
	m.appended.WithLabelValues(path).Inc()
}

// Refused counts one refusal.
func (m *Metrics) Refused(path, code string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(path, code).Inc()
}

// AppendError counts one unacknowledged append.
func (m *Metrics) AppendError(path string) {
	if m == nil {
		return
	}
	m.appendErrs.WithLabelValues(path).Inc()
}

// Folded records one committed projector batch.
func (m *Metrics) Folded(events int, took time.Duration) {
	if m == nil {
		return
	}
	m.folded.Add(float64(events))
	m.foldBatch.Observe(took.Seconds())
}

// HTTPRequest records one HTTP request. Streams (an event stream such as
// /v1/watch or the MCP endpoint's) are not recorded: their duration is how
// long a client stayed, not a latency (the caller leaves them out).
func (m *Metrics) HTTPRequest(route string, status int, took time.Duration) {
	if m == nil {
		return
	}
	m.httpDur.WithLabelValues(route, strconv.Itoa(status)).Observe(took.Seconds())
}

// lagCollector reads the lag when scraped.
type lagCollector struct{ f LagFunc }

var (
	lagDesc       = prometheus.NewDesc(Namespace+"_projector_lag_events", "Events in the stream not yet folded into the projection.", nil, nil)
	streamSeqDesc = prometheus.NewDesc(Namespace+"_stream_seq", "Last sequence of the LEDGER stream.", nil, nil)
	projSeqDesc   = prometheus.NewDesc(Namespace+"_projected_seq", "Last stream sequence folded into the projection.", nil, nil)
)

// scrapeTimeout bounds the stream read of one scrape.
const scrapeTimeout = 2 * time.Second

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- streamSeqDesc
	ch <- projSeqDesc
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	stream, projected, err := c.f(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(lagDesc, err)
		return
	}
	lag := uint64(0)
	if stream > projected {
		lag = stream - projected
	}
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag))
	ch <- prometheus.MustNewConstMetric(streamSeqDesc, prometheus.GaugeValue, float64(stream))
	ch <- prometheus.MustNewConstMetric(projSeqDesc, prometheus.GaugeValue, float64(projected))
}
