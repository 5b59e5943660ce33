package monitor

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"
)

func osMkdir(dir string) error { return os.MkdirAll(dir, 0o700) }

// Collector returns the monitor's metrics, read at scrape time:
//
//	ledger_monitor_checked_size               tree size of the last checkpoint accepted (-1: none)
//	ledger_monitor_entries_verified_total     entries verified (leaf hash, decoding, root) since the start
//	ledger_monitor_checks_total               checks made
//	ledger_monitor_check_errors_total         checks that could not be made (ledger unreachable)
//	ledger_monitor_findings_total{kind}       findings by kind (fork, rewritten, shrink, altered, missing, bad_checkpoint)
//	ledger_monitor_last_finding_timestamp_seconds  time of the last finding (0: none)
//	ledger_monitor_last_check_timestamp_seconds    time of the last check
func (m *Monitor) Collector() prometheus.Collector { return collector{m} }

var (
	descChecked  = prometheus.NewDesc("ledger_monitor_checked_size", "Tree size of the last checkpoint the monitor accepted (-1: none).", nil, nil)
	descVerified = prometheus.NewDesc("ledger_monitor_entries_verified_total", "Entries the monitor verified (leaf hash against the signed tree, decoding) since it started.", nil, nil)
	descChecks   = prometheus.NewDesc("ledger_monitor_checks_total", "Checks the monitor made.", nil, nil)
	descErrors   = prometheus.NewDesc("ledger_monitor_check_errors_total", "Checks that could not be made (the ledger unreachable, a transport error); not findings.", nil, nil)
	descFindings = prometheus.NewDesc("ledger_monitor_findings_total", "Findings by kind: fork, rewritten, shrink, altered, missing, bad_checkpoint.", []string{"kind"}, nil)
	descLastFind = prometheus.NewDesc("ledger_monitor_last_finding_timestamp_seconds", "Unix time of the last finding (0: none).", nil, nil)
	descLastChk  = prometheus.NewDesc("ledger_monitor_last_check_timestamp_seconds", "Unix time of the last check (0: none).", nil, nil)
)

// findingKinds are the kinds always exported (0 until one happens).
var findingKinds = []string{"fork", "rewritten", "shrink", "altered", "missing", "bad_checkpoint"}

type collector struct{ m *Monitor }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descChecked, descVerified, descChecks, descErrors, descFindings, descLastFind, descLastChk} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	ch <- prometheus.MustNewConstMetric(descChecked, prometheus.GaugeValue, float64(s.Size))
	ch <- prometheus.MustNewConstMetric(descVerified, prometheus.CounterValue, float64(s.EntriesVerified))
	ch <- prometheus.MustNewConstMetric(descChecks, prometheus.CounterValue, float64(s.Checks))
	ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(s.Errors))
	for _, k := range findingKinds {
		ch <- prometheus.MustNewConstMetric(descFindings, prometheus.CounterValue, float64(s.Findings[k]), k)
	}
	unix := func(t interface {
		IsZero() bool
		Unix() int64
	}) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.Unix())
	}
	ch <- prometheus.MustNewConstMetric(descLastFind, prometheus.GaugeValue, unix(s.LastFindingAt))
	ch <- prometheus.MustNewConstMetric(descLastChk, prometheus.GaugeValue, unix(s.LastCheckAt))
}
