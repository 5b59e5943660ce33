package metrics_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/server/metrics"
)

// TestDocsListEveryMetric: docs/api.md's "Metrics" section names every
// ledger_ series the ledger registers (the Go and process collectors'
// are "Go and process metrics" there), and names none it does not.
func TestDocsListEveryMetric(t *testing.T) {
	m := metrics.New(func(context.Context) (uint64, uint64, error) { return 5, 3, nil })
	m.HTTPRoutes([]string{"GET /v1/stats"})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), metrics.Namespace+"_") {
			registered = append(registered, f.GetName())
		}
	}
	b, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Metrics\n")
	if start < 0 {
		t.Fatal("docs/api.md has no \"## Metrics\" section")
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var documented []string
	for _, mm := range regexp.MustCompile("`(ledger_[a-z0-9_]+)").FindAllStringSubmatch(section, -1) {
		if !slices.Contains(documented, mm[1]) {
			documented = append(documented, mm[1])
		}
	}
	slices.Sort(registered)
	slices.Sort(documented)
	if !slices.Equal(registered, documented) {
		var missing, extra []string
		for _, n := range registered {
			if !slices.Contains(documented, n) {
				missing = append(missing, n)
			}
		}
		for _, n := range documented {
			if !slices.Contains(registered, n) {
				extra = append(extra, n)
			}
		}
		t.Errorf("docs/api.md's metrics differ from the registered ones: not documented %q; documented, not registered %q", missing, extra)
	}
}
