package bench

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv marks this test binary as a memory child (see TestMain).
const childEnv = "LEDGER_BENCH_TEST_CHILD"

// TestMain lets the test binary stand in for `ledger bench` as the memory
// figure's child process.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := ChildMain(context.Background(), os.Args[1:], os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tinyOptions are the smallest sizes that still exercise every figure.
func tinyOptions(t *testing.T) Options {
	t.Setenv(childEnv, "1") // inherited by the memory children only
	return Options{
		Quick:         true,
		Reps:          3,
		Proposals:     60,
		SyncProposals: 12,
		IngestEvents:  40,
		AgentEvents:   64,
		BridgeEvents:  300,
		WritesEvents:  200,
		Events:        200,
		ReadProposals: 150,
		Gets:          20,
		Lists:         5,
		Duration:      300 * time.Millisecond,
		MemEvents:     []int{100, 300},
		MemBudget:     time.Minute,
		TempDir:       t.TempDir(),
		ChildCommand:  []string{os.Args[0]},
	}
}

// TestRunPrintsEveryRowAndTheRatiosLine runs the whole benchmark with tiny
// sizes and checks the report's shape, not its numbers (the machine's
// speed is not the test's business).
func TestRunPrintsEveryRowAndTheRatiosLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several embedded servers")
	}
	var progress bytes.Buffer
	o := tinyOptions(t)
	o.Progress = &progress
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	var out bytes.Buffer
	if err := rep.Markdown(&out, "ledger bench --test"); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^ratios: append=\d+\.\d\d append_sync=\d+\.\d\d fold=\d+\.\d\d ingest=\d+\.\d\d agents=\d+\.\d\d$`).MatchString(last) {
		t.Fatalf("last line %q is not the ratios line\n%s", last, text)
	}
	if !strings.Contains(text, "with holes and coverage") {
		t.Fatalf("no coverage cost row\n%s", text)
	}
	// Both folds wrote something, the ledger more per event.
	m := regexp.MustCompile(`fold write volume \(bytes per event folded, Pebble's WAL and the tables its flushes wrote, median\): ledger (\d+) B, naive baseline (\d+) B`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no fold write volume note\n%s", text)
	}
	if l, b := atoi(t, m[1]), atoi(t, m[2]); b == 0 || l <= b {
		t.Fatalf("fold write volume: ledger %d B, baseline %d B per event; want both > 0, the ledger's larger", l, b)
	}
	for _, want := range []string{
		"fold footprint: the rebuilt projection takes ",
		"| figure | median | spread",
		"| append: events/s",
		"| append_sync: events/s",
		"| fold: events/s",
		"| ingest: events/s",
		"| agents: events/s",
		"| ingest_r3: events/s",
		"| bridge: lifecycle envelopes/s, stand-in MEW gateway (another process",
		"| writes, projector folding along: events/s",
		"| writes, projector stopped: events/s",
		"| live lag p50",
		"| live lag p99 (sync_interval always)",
		"| GET /v1/proposals/{id} p50",
		"| GET /v1/proposals/{id} p99",
		"| list p50",
		"| list p99",
		"| peak RSS (VmHWM) folding 100 events",
		"| peak RSS (VmHWM) folding 300 events",
		"| peak RSS growth from 100 to 300 events",
		"- machine: ",
		"- load average",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q\n%s", want, text)
		}
	}
	// Every table row has the six columns.
	for _, l := range lines {
		if strings.HasPrefix(l, "| ") && strings.Count(l, " | ") != 5 {
			t.Errorf("row with %d separators, want 5: %s", strings.Count(l, " | "), l)
		}
	}
	// Nothing is left behind in the temporary directory.
	left, err := os.ReadDir(o.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Quick: true, ChildCommand: []string{"x"}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Proposals != QuickProposals || o.Events != QuickEvents || o.Reps != DefaultReps || o.Duration != QuickDuration {
		t.Fatalf("quick defaults not filled: %+v", o)
	}
	full := Options{ChildCommand: []string{"x"}}
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	if full.Proposals != FullProposals || full.ReadProposals != FullReadProposals || len(full.MemEvents) != len(FullMemEvents) {
		t.Fatalf("full defaults not filled: %+v", full)
	}
	for _, bad := range []Options{
		{Reps: 2, ChildCommand: []string{"x"}},
		{Only: []string{"nope"}},
		{MemEvents: []int{10, 5}, ChildCommand: []string{"x"}},
		{Duration: time.Millisecond, ChildCommand: []string{"x"}},
		{}, // the memory figure needs a child command
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", bad)
		}
	}
	only := Options{Only: []string{FigFold}}
	if err := only.Validate(); err != nil {
		t.Fatalf("a run without the memory figure needs no child command: %v", err)
	}
}

func TestRatiosLineAndFormatting(t *testing.T) {
	r := &Report{Ratios: map[string]float64{FigAppend: 0.8549, FigFold: 1.3}}
	if got, want := r.RatiosLine(), "ratios: append=0.85 append_sync=n/a fold=1.30 ingest=n/a agents=n/a"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{1234567.4, unitRate, "1,234,567"}, {0.4567, unitMs, "0.457"}, {12.34, unitMs, "12.3"},
		{4321, unitMs, "4,321"}, {-3.25, unitPct, "-3.2"}, {255.55, unitMiB, "255.6"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %s) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median = %v", got)
	}
	if got := durQuantile([]time.Duration{5, 1, 4, 2, 3}, 0.99); got != 5 {
		t.Errorf("p99 = %v", got)
	}
}

func TestParseProcField(t *testing.T) {
	status := []byte("Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t 42 kB\n")
	if n, ok := parseProcField(status, "VmHWM"); !ok || n != 123456 {
		t.Fatalf("VmHWM = %d, %v", n, ok)
	}
	if _, ok := parseProcField(status, "VmSwap"); ok {
		t.Fatal("found an absent field")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
