package projections

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// captureDir holds traffic captured from the real MEW v0.11.0 gateway, SDK
// and CLI, with what the ledger must make of it (expected.json; see its
// README).
const captureDir = "../testdata/mew-v0.11"

// captureExpected is expected.json.
type captureExpected struct {
	Proposals map[string]struct {
		Scenario     string   `json:"scenario"`
		State        string   `json:"state"`
		Proposer     string   `json:"proposer"`
		To           []string `json:"to"`
		Method       string   `json:"method"`
		Dialect      string   `json:"dialect"`
		DecidedBy    string   `json:"decided_by"`
		DecidedEvent string   `json:"decided_event"`
		Reason       *string  `json:"reason"`
		Anomalies    []string `json:"anomalies"`
		Fulfillments []struct {
			Event   string `json:"event"`
			From    string `json:"from"`
			Late    bool   `json:"late"`
			Outcome string `json:"outcome"`
		} `json:"fulfillments"`
		FulfillmentsLen   *int     `json:"fulfillments_len"`
		LifecycleEffects  []string `json:"lifecycle_effects"`
		HistoryIncludes   []string `json:"history_includes"`
		WithdrawalExplain string   `json:"withdrawal_explanation_contains"`
		Rejections        []struct {
			Event      string `json:"event"`
			From       string `json:"from"`
			Reason     string `json:"reason"`
			ExplainHas string `json:"explanation_contains"`
		} `json:"rejections"`
	} `json:"proposals"`
	Scenarios map[string]struct {
		File      string `json:"file"`
		Envelopes int    `json:"envelopes"`
		Lifecycle []struct {
			Line int    `json:"line"`
			ID   string `json:"id"`
			Kind string `json:"kind"`
			Type string `json:"type"`
		} `json:"lifecycle"`
		NotLifecycle []struct {
			Line int    `json:"line"`
			ID   string `json:"id"`
			Kind string `json:"kind"`
		} `json:"not_lifecycle"`
	} `json:"scenarios"`
}

func readCaptureLines(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(captureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestMEWCaptures folds every capture's lifecycle envelopes, in file order,
// each scenario in its own space, as the append path would store them
// (contract §14: the bridge appends what the gateway delivers), into a MemState
// and a Pebble store, and checks exactly what expected.json says: every
// proposal's state, proposer, decision, anomalies (the exact set),
// fulfilments and their outcomes, rejections and explanations, and the
// effects of its lifecycle events. It also checks that the lines
// expected.json calls lifecycle are the ones the submit paths take, with the
// type it names, and that the others are refused as not lifecycle.
func TestMEWCaptures(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(captureDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp captureExpected
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	if len(exp.Scenarios) == 0 || len(exp.Proposals) == 0 {
		t.Fatal("expected.json names nothing")
	}
	base := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	mem := fold.NewMemState()
	f := fold.NewFolder()
	var log []fold.Event
	names := make([]string, 0, len(exp.Scenarios))
	for name := range exp.Scenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		sc := exp.Scenarios[name]
		lines := readCaptureLines(t, sc.File)
		if len(lines) != sc.Envelopes {
			t.Fatalf("%s: %d lines, expected.json says %d", sc.File, len(lines), sc.Envelopes)
		}
		for _, nl := range sc.NotLifecycle {
			raw := lines[nl.Line-1]
			p, err := ledger.PrepareStandalone(name, raw, ledger.SubmitLimits{}, base)
			if err == nil {
				t.Errorf("%s line %d (%s %s): taken by the submit path as %s, expected.json says not lifecycle", sc.File, nl.Line, nl.Kind, nl.ID, p.Decoded.Type)
			}
		}
		for _, lc := range sc.Lifecycle {
			raw := lines[lc.Line-1]
			at := base.Add(time.Duration(len(log)+1) * time.Second)
			p, err := ledger.PrepareStandalone(name, raw, ledger.SubmitLimits{}, at)
			if err != nil {
				t.Fatalf("%s line %d (%s %s): refused: %v", sc.File, lc.Line, lc.Kind, lc.ID, err)
			}
			if string(p.Decoded.Type) != lc.Type || p.Decoded.Env.ID != lc.ID {
				t.Fatalf("%s line %d: %s %s, expected.json says %s %s", sc.File, lc.Line, p.Decoded.Type, p.Decoded.Env.ID, lc.Type, lc.ID)
			}
			ev := fold.Event{Seq: uint64(len(log) + 1), Time: at, Subject: p.Subject, Raw: raw}
			log = append(log, ev)
			if _, err := f.Apply(mem, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	compareWithStore(t, mem, log)

	enc := func(v any) string { j, _ := json.Marshal(v); return string(j) }
	for id, want := range exp.Proposals {
		t.Run(want.Scenario+"/"+id, func(t *testing.T) {
			p, _ := mem.Proposal(want.Scenario, id)
			if p == nil {
				t.Fatalf("no proposal")
			}
			hist := mem.History(want.Scenario, id)
			ctx := fmt.Sprintf("\nproposal %s\nhistory %s", enc(p), enc(hist))
			check := func(what string, got, wantV any) {
				t.Helper()
				if enc(got) != enc(wantV) {
					t.Errorf("%s = %s, want %s%s", what, enc(got), enc(wantV), ctx)
				}
			}
			check("state", string(p.State), want.State)
			check("proposer", p.Proposer, want.Proposer)
			if want.To != nil {
				check("to", p.To, want.To)
			}
			if want.Method != "" {
				check("method", p.Method, want.Method)
			}
			if want.Dialect != "" {
				check("dialect", p.Dialect, want.Dialect)
			}
			check("decided_by", p.DecidedBy, want.DecidedBy)
			if want.DecidedEvent != "" {
				check("decided_event", p.DecidedEvent, want.DecidedEvent)
			}
			if want.Reason != nil {
				check("reason", p.Reason, *want.Reason)
			}
			gotAn, wantAn := slices.Sorted(slices.Values(p.Anomalies)), slices.Sorted(slices.Values(want.Anomalies))
			if gotAn == nil {
				gotAn = []string{}
			}
			if wantAn == nil {
				wantAn = []string{}
			}
			check("anomalies", gotAn, wantAn)
			if want.FulfillmentsLen != nil {
				check("len(fulfillments)", len(p.Fulfillments), *want.FulfillmentsLen)
			}
			if want.Fulfillments != nil {
				if len(p.Fulfillments) != len(want.Fulfillments) {
					t.Fatalf("fulfillments %s, want %s%s", enc(p.Fulfillments), enc(want.Fulfillments), ctx)
				}
				for i, wf := range want.Fulfillments {
					gf := p.Fulfillments[i]
					check(fmt.Sprintf("fulfillments[%d]", i), []any{gf.Event, gf.From, gf.Late, gf.Outcome}, []any{wf.Event, wf.From, wf.Late, wf.Outcome})
				}
			}
			if want.Rejections != nil {
				if len(p.Rejections) != len(want.Rejections) {
					t.Fatalf("rejections %s, want %s%s", enc(p.Rejections), enc(want.Rejections), ctx)
				}
				for i, wr := range want.Rejections {
					gr := p.Rejections[i]
					check(fmt.Sprintf("rejections[%d]", i), []any{gr.Event, gr.From, gr.Reason}, []any{wr.Event, wr.From, wr.Reason})
					if !strings.Contains(gr.Explanation, wr.ExplainHas) {
						t.Errorf("rejections[%d].explanation %q lacks %q", i, gr.Explanation, wr.ExplainHas)
					}
				}
			}
			if want.WithdrawalExplain != "" {
				if p.Withdrawal == nil || !strings.Contains(p.Withdrawal.Explanation, want.WithdrawalExplain) {
					t.Errorf("withdrawal %s lacks explanation %q%s", enc(p.Withdrawal), want.WithdrawalExplain, ctx)
				}
			}
			if want.LifecycleEffects != nil {
				var effects []string
				for _, h := range hist {
					switch ledger.Type(h.Type) {
					case ledger.TypeProposal, ledger.TypeWithdraw, ledger.TypeReject, ledger.TypeFulfil:
						effects = append(effects, string(h.Effect))
					}
				}
				check("lifecycle effects", effects, want.LifecycleEffects)
			}
			for _, hid := range want.HistoryIncludes {
				if !slices.ContainsFunc(hist, func(h api.HistoryEntry) bool { return h.ID == hid }) {
					t.Errorf("history lacks %s%s", hid, ctx)
				}
			}
		})
	}
}

// TestMEWCaptureSubjects: every lifecycle envelope of the captures is keyed
// as contract §4 says (a check that the capture test's subjects are the append
// path's).
func TestMEWCaptureSubjects(t *testing.T) {
	for _, name := range []string{"a-fulfil.jsonl", "i-http.jsonl"} {
		for i, raw := range readCaptureLines(t, name) {
			p, err := ledger.PrepareStandalone("s", raw, ledger.SubmitLimits{}, time.Now())
			if err != nil {
				continue
			}
			want := subjects.Event{Space: "s", Key: p.Decoded.Key, Type: string(p.Decoded.Type), Sender: p.Decoded.Env.From}.String()
			if p.Subject != want {
				t.Errorf("%s line %d: subject %s, want %s", name, i+1, p.Subject, want)
			}
		}
	}
}
