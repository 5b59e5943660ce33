package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// capturesDir holds the real MEW v0.11.0 traffic (see its README).
var capturesDir = filepath.Join("..", "..", "testdata", "mew-v0.11")

// expected is expected.json.
type expected struct {
	Proposals map[string]expectedProposal `json:"proposals"`
	Scenarios map[string]scenario         `json:"scenarios"`
}

type scenario struct {
	File         string     `json:"file"`
	Envelopes    int        `json:"envelopes"`
	Lifecycle    []lineInfo `json:"lifecycle"`
	NotLifecycle []lineInfo `json:"not_lifecycle"`
	Orphans      []lineInfo `json:"permanent_orphans_if_forwarded"`
}

type lineInfo struct {
	Line int    `json:"line"`
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Type string `json:"type"`
}

type expectedProposal struct {
	Scenario        string   `json:"scenario"`
	State           string   `json:"state"`
	Proposer        string   `json:"proposer"`
	To              []string `json:"to"`
	Method          string   `json:"method"`
	Dialect         string   `json:"dialect"`
	DecidedBy       string   `json:"decided_by"`
	DecidedEvent    string   `json:"decided_event"`
	Reason          string   `json:"reason"`
	Anomalies       []string `json:"anomalies"`
	FulfillmentsLen *int     `json:"fulfillments_len"`
	Fulfillments    []struct {
		Event   string `json:"event"`
		From    string `json:"from"`
		Late    bool   `json:"late"`
		Outcome string `json:"outcome"`
	} `json:"fulfillments"`
	Rejections []struct {
		Event               string `json:"event"`
		From                string `json:"from"`
		Reason              string `json:"reason"`
		ExplanationContains string `json:"explanation_contains"`
	} `json:"rejections"`
	LifecycleEffects              []string `json:"lifecycle_effects"`
	HistoryIncludes               []string `json:"history_includes"`
	WithdrawalExplanationContains string   `json:"withdrawal_explanation_contains"`
}

func loadExpected(t testing.TB) expected {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(capturesDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Scenarios) == 0 || len(e.Proposals) == 0 {
		t.Fatal("expected.json has no scenarios or proposals")
	}
	return e
}

// scenarioNames returns the scenarios in a fixed order.
func scenarioNames(e expected) []string {
	var names []string
	for n := range e.Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// readLines returns the lines of a capture file (1-based: lines[0] is line 1).
func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, append([]byte(nil), l...))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mewSpace returns the MEW space id of a capture (its gateway log's
// space_id).
func mewSpace(t testing.TB, name string) string {
	t.Helper()
	for _, l := range readLines(t, filepath.Join(capturesDir, "gateway-logs", name+".jsonl")) {
		var r struct {
			SpaceID string `json:"space_id"`
		}
		if json.Unmarshal(l, &r) == nil && r.SpaceID != "" {
			return r.SpaceID
		}
	}
	t.Fatalf("no space_id in the gateway log of %s", name)
	return ""
}
