package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Units of a Row.
const (
	unitRate = "events/s"
	unitMs   = "ms"
	unitMiB  = "MiB"
	unitPct  = "%"
)

// Row is one line of the table.
type Row struct {
	Figure string
	Unit   string
	// Values are the per-repetition figures; Baseline the baseline's,
	// measured in the same repetitions (nil when the figure has none).
	Values, Baseline []float64
	BaseName         string
	// Ratios are Values[i]/Baseline[i].
	Ratios []float64
	// Target is the target ("" when none); Verdict is "met",
	// "missed" or "".
	Target, Verdict string
	// Single marks a figure computed once from other rows (no spread).
	Single bool
}

func (r *Row) ratios() {
	r.Ratios = make([]float64, len(r.Values))
	for i := range r.Values {
		r.Ratios[i] = r.Values[i] / r.Baseline[i]
	}
}

func (r *Row) verdict(met bool) {
	r.Verdict = "missed"
	if met {
		r.Verdict = "met"
	}
}

// Report is the outcome of Run.
type Report struct {
	Mode               string
	Reps               int
	Machine            Machine
	LoadStart, LoadEnd string
	Started            time.Time
	Elapsed            time.Duration
	Rows               []Row
	// Ratios are the ratios line's figures (FigAppend, FigAppendSync,
	// FigFold); a figure not run is absent.
	Ratios map[string]float64
	// Notes are printed under the table, one paragraph each: what a
	// figure measured besides its row (e.g. the fold's write volume).
	Notes []string
}

// RatiosLine is the report's last line:
// "ratios: append=X append_sync=Y fold=Z ingest=I agents=A", two decimals, n/a for a figure
// that did not run.
func (r *Report) RatiosLine() string {
	f := func(name string) string {
		v, ok := r.Ratios[name]
		if !ok || math.IsNaN(v) {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return fmt.Sprintf("ratios: append=%s append_sync=%s fold=%s ingest=%s agents=%s", f(FigAppend), f(FigAppendSync), f(FigFold), f(FigIngest), f(FigAgents))
}

// Markdown writes the report: a header (mode, command, machine, load), the
// table, notes, and the ratios line last.
func (r *Report) Markdown(w io.Writer, command string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## ledger bench (%s mode)\n\n", r.Mode)
	if command != "" {
		fmt.Fprintf(&b, "- command: `%s`\n", command)
	}
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- load average (1, 5, 15 min): %s at the start, %s at the end\n", orUnknown(r.LoadStart), orUnknown(r.LoadEnd))
	fmt.Fprintf(&b, "- started %s, took %v\n\n", r.Started.UTC().Format(time.RFC3339), r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "| figure | median | spread (min–max, %d reps) | baseline, same run (median) | ratio (median, min–max) | target |\n", r.Reps)
	b.WriteString("|---|---:|---|---|---|---|\n")
	for _, row := range r.Rows {
		med := median(row.Values)
		lo, hi := minMax(row.Values)
		spread := formatValue(lo, row.Unit) + " – " + formatValue(hi, row.Unit)
		if row.Single || len(row.Values) == 1 {
			spread = "one run"
		}
		baseline, ratio := "—", "—"
		if row.Baseline != nil {
			baseline = formatValue(median(row.Baseline), row.Unit) + " " + row.Unit + " (" + row.BaseName + ")"
			rlo, rhi := minMax(row.Ratios)
			ratio = fmt.Sprintf("**%.2f** (%.2f–%.2f)", median(row.Ratios), rlo, rhi)
		}
		target := row.Target
		if target == "" {
			target = "—"
		} else if row.Verdict != "" {
			target += ": " + row.Verdict
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s |\n", row.Figure, formatValue(med, row.Unit), row.Unit, spread, baseline, ratio, target)
	}
	b.WriteString("\nEach ratio pairs the ledger and its baseline measured back to back in the same repetition (alternating which runs first); the ratio column is the median of those per-repetition ratios.\n\n")
	for _, n := range r.Notes {
		b.WriteString(n + "\n\n")
	}
	b.WriteString(r.RatiosLine())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// formatValue formats a figure for its unit.
func formatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	switch unit {
	case unitRate:
		return thousands(int64(math.Round(v)))
	case unitMs:
		switch {
		case v < 10:
			return strconv.FormatFloat(v, 'f', 3, 64)
		case v < 1000:
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return thousands(int64(math.Round(v)))
	case unitPct:
		return fmt.Sprintf("%+.1f", v)
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

// thousands formats n with comma thousands separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
