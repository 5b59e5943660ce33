package witness

import "github.com/prometheus/client_golang/prometheus"

// Collector returns the witnesses' metrics, read at scrape time:
//
//	ledger_witness_cosigned_size{witness}  tree size of the last checkpoint the witness cosigned (-1: none yet)
//	ledger_witness_failures{witness}       failed requests in a row (0: the last one succeeded)
//	ledger_witness_alarm{witness}          1 when the witness refused the ledger's history
//	ledger_witnessed_size                  tree size of the latest checkpoint holding the quorum (-1: none)
func (s *Submitter) Collector() prometheus.Collector { return collector{s} }

var (
	descCosigned = prometheus.NewDesc("ledger_witness_cosigned_size",
		"Tree size of the last checkpoint the witness cosigned since the ledger started (-1: none yet).", []string{"witness"}, nil)
	descFailures = prometheus.NewDesc("ledger_witness_failures",
		"Failed add-checkpoint requests to the witness in a row (0: the last one succeeded).", []string{"witness"}, nil)
	descAlarm = prometheus.NewDesc("ledger_witness_alarm",
		"1 when the witness refused the ledger's history (it answered a consistency proof 422).", []string{"witness"}, nil)
	descWitnessed = prometheus.NewDesc("ledger_witnessed_size",
		"Tree size of the latest checkpoint holding the witnesses' quorum (-1: none).", nil, nil)
)

type collector struct{ s *Submitter }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCosigned
	ch <- descFailures
	ch <- descAlarm
	ch <- descWitnessed
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.s.Status() {
		ch <- prometheus.MustNewConstMetric(descCosigned, prometheus.GaugeValue, float64(st.CosignedSize), st.Name)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.GaugeValue, float64(st.Failures), st.Name)
		alarm := 0.0
		if st.Alarm != "" {
			alarm = 1
		}
		ch <- prometheus.MustNewConstMetric(descAlarm, prometheus.GaugeValue, alarm, st.Name)
	}
	w := int64(-1)
	if e, ok := c.s.opts.Proofs.Log().Witnessed(); ok {
		w = e.Checkpoint.Size
	}
	ch <- prometheus.MustNewConstMetric(descWitnessed, prometheus.GaugeValue, float64(w))
}
