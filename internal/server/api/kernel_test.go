package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/mewledger/ledger/api"
)

// exampleLines reads a file of the README's examples, one JSON value per
// line.
func exampleLines(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open("../../../examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, append([]byte(nil), l...))
		}
	}
	return out
}

// TestKernelReadmeFlow is the README's "Kernel proposals" walkthrough
// through POST /v1/events: bare kernel proposals (recognised, and forced
// with ?kernel=1) wrapped by the ledger, two approvals from distinct
// approvers, a fulfilment (method kernel/<action_type>, params the
// proposal's parameters) → fulfilled, approved, no anomaly; a fulfilment
// before any approval → unapproved_fulfillment; V-PROP refusals with the
// rule id and the field relative to the bare object.
func TestKernelReadmeFlow(t *testing.T) {
	l := start(t)
	props := exampleLines(t, "kernel-proposals.jsonl")
	r1 := l.post(string(props[0])) // recognised: no protocol, a proposal_id
	if r1.ID != "pay-inv-9001" {
		t.Fatalf("bare proposal appended as %+v", r1)
	}
	st, _, body := l.do(http.MethodPost, "/v1/events?kernel=1", "application/json", props[1])
	if st != http.StatusAccepted {
		t.Fatalf("?kernel=1: %d %s", st, body)
	}
	if again := l.post(string(props[0])); !again.Duplicate || again.Seq != r1.Seq {
		t.Fatalf("the same bare proposal again: %+v, want a duplicate of seq %d", again, r1.Seq)
	}
	var last uint64
	for _, env := range exampleLines(t, "kernel-approvals.jsonl") {
		last = l.post(string(env)).Seq
	}

	var p api.Proposal
	l.get("/v1/proposals/pay-inv-9001?min_seq="+itoa(last), http.StatusOK, &p)
	if p.State != api.StateFulfilled || p.Approved == nil || !*p.Approved || len(p.Anomalies) != 0 ||
		p.Method != "kernel/transact" || p.Proposer != "agent-billing" || p.DecidedBy != "payments-gateway" {
		t.Fatalf("pay-inv-9001: state %s approved %v anomalies %v method %s proposer %s decided by %s",
			p.State, p.Approved, p.Anomalies, p.Method, p.Proposer, p.DecidedBy)
	}
	if p.Kernel == nil || p.Kernel.ApprovalClass != "dual" || p.Kernel.Counted != 2 || len(p.Approvals) != 2 {
		t.Fatalf("pay-inv-9001 approvals: %+v %+v", p.Kernel, p.Approvals)
	}
	var q api.Proposal
	l.get("/v1/proposals/pay-inv-9002", http.StatusOK, &q)
	if q.State != api.StateFulfilled || q.Approved == nil || *q.Approved || !slices.Equal(q.Anomalies, []string{api.AnomalyUnapprovedFulfillment}) {
		t.Fatalf("pay-inv-9002: state %s approved %v anomalies %v", q.State, q.Approved, q.Anomalies)
	}

	// Refusals: the rule id and the field of the bare object.
	bad := exampleLines(t, "kernel-bad.jsonl")
	l.wantError(http.MethodPost, "/v1/events", "application/json", bad[0], http.StatusBadRequest, "V-PROP-004", "action_type")
	l.wantError(http.MethodPost, "/v1/events", "application/json", bad[1], http.StatusBadRequest, "V-PROP-014", "approval.required")
	// Forced: a bare object without proposal_id is V-PROP-001, not "no protocol".
	l.wantError(http.MethodPost, "/v1/events?kernel=true", "application/json", []byte(`{"actor":"a"}`), http.StatusBadRequest, "V-PROP-001", "proposal_id")
	l.wantError(http.MethodPost, "/v1/events?kernel=maybe", "application/json", props[0], http.StatusBadRequest, api.CodeBadQuery, "kernel")

	// NDJSON: bare and enveloped lines mixed; refusals per line.
	body2 := bytes.Join([][]byte{props[0], bad[0], []byte(goldenProposal)}, []byte("\n"))
	st, _, out := l.do(http.MethodPost, "/v1/events", "application/x-ndjson", body2)
	if st != http.StatusOK {
		t.Fatalf("NDJSON: %d %s", st, out)
	}
	var res []api.AppendResult
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r api.AppendResult
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	if len(res) != 3 || !res[0].Duplicate || res[0].ID != "pay-inv-9001" || res[1].Error == nil || res[1].Error.Code != "V-PROP-004" ||
		res[1].Error.Field != "action_type" || res[2].Error != nil || res[2].ID != "env-req-1" {
		t.Fatalf("NDJSON results: %s", out)
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }
