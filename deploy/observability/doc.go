// Package observability holds the ledger's Prometheus alerting rules
// (alerts.yml, with promtool unit tests in alerts_test.yml) and a Grafana
// dashboard (ledger-dashboard.json). Its test checks the rules with
// promtool and that every metric the rules and the dashboard name is one
// a running ledger exports. It has no code of its own.
package observability
