package projections

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// checkEncoders requires each fast encoder to produce its reference's bytes
// (or its error): the proposal's the served encoding (encodeServed), the
// others json.Marshal's.
func checkEncoders(t *testing.T, p *api.Proposal, h *api.HistoryEntry, r *fold.EventRef) {
	t.Helper()
	same := func(what string, got []byte, gerr error, v any) {
		t.Helper()
		var want []byte
		var werr error
		if p, ok := v.(*api.Proposal); ok {
			want, werr = encodeServed(p)
		} else {
			want, werr = json.Marshal(v)
		}
		if (gerr != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s (err %v)\nwant %s (err %v)", what, got, gerr, want, werr)
		}
	}
	if p != nil {
		b, err := marshalProposal(p)
		same("proposal", b, err, p)
	}
	if h != nil {
		b, err := marshalHistory(h)
		same("history entry", b, err, h)
	}
	if r != nil {
		b, err := marshalEventRef(r)
		same("event ref", b, err, r)
	}
}

// TestEncodersMatchMarshal compares the encoders with json.Marshal on
// every record of folded workloads and of the hostile corpus, and on
// random records with hostile strings, odd times and every optional field
// on and off.
func TestEncodersMatchMarshal(t *testing.T) {
	st := fold.NewMemState()
	f := fold.NewFolder()
	seq := uint64(0)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fold := func(raw []byte) {
		seq++
		subj := "ledger.default.x.proposal.y"
		if d, err := ledger.Decode(raw, ledger.DecodeOptions{}); err == nil && d.Type.Valid() {
			subj = subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		if _, err := f.Apply(st, fold.Event{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Subject: subj, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	}
	g := workload.New(workload.Options{Seed: 4, PadTo: 600, Disorder: 20, Duplicates: 5, Foreign: 10,
		Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 15, Response: 10, Chat: 10}})
	for range 3000 {
		fold(g.Next())
	}
	cases, err := badinput.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if len(c.Data) < 64<<10 {
			fold(c.Data)
		}
	}
	n := 0
	for _, sp := range st.Spaces() {
		for _, p := range st.Proposals(sp) {
			checkEncoders(t, p, nil, nil)
			n++
		}
		for _, r := range st.EventRefs(sp) {
			checkEncoders(t, nil, nil, r)
		}
		for _, key := range st.HistoryKeys(sp) {
			for _, h := range st.History(sp, key) {
				checkEncoders(t, nil, &h, nil)
			}
		}
	}
	if n < 500 {
		t.Fatalf("only %d proposals folded", n)
	}

	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		p, h, r := randomRecords(rng)
		checkEncoders(t, p, h, r)
	}
}

var hostileStrings = []string{
	"", "a", "plain-id", `quo"te`, `back\slash`, "<script>&amp;", "tab\there\nnl\r\b\f", "\x00\x01\x1f\x7f",
	"é ü 😀", "\u2028\u2029", "bad\xffutf8\xc3", "\xe2\x80", "/slash/", strings256(),
}

func strings256() string { return string(bytes.Repeat([]byte("x"), 256)) }

func randomRecords(rng *rand.Rand) (*api.Proposal, *api.HistoryEntry, *fold.EventRef) {
	s := func() string { return hostileStrings[rng.IntN(len(hostileStrings))] }
	list := func() []string {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+rng.IntN(3))
		for i := range out {
			out[i] = s()
		}
		return out
	}
	tm := func() time.Time {
		switch rng.IntN(6) {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // json.Marshal refuses
		case 2:
			return time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("X", 5*3600+1800))
		case 3:
			return time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)).UTC()
		case 4:
			return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	params := []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`{}`), json.RawMessage(`{"a":[1,2,{"b":"c"}]}`),
		json.RawMessage(`{ "a" : 1 }`), json.RawMessage(`{"h":"<b>&"}`), json.RawMessage("{\"u\":\"\u2028\"}"), json.RawMessage(`"x"`)}
	u := func() uint64 {
		if rng.IntN(3) == 0 {
			return 0
		}
		return rng.Uint64() >> rng.IntN(64)
	}
	p := &api.Proposal{
		ID: s(), Space: s(), State: api.ProposalState(s()), Proposer: s(), To: list(), Method: s(),
		Params: params[rng.IntN(len(params))], Dialect: s(), Kind: s(), Context: s(),
		CreatedSeq: u(), CreatedAt: tm(), UpdatedSeq: u(), UpdatedAt: tm(), DecidedBy: s(), DecidedEvent: s(),
		DecidedSeq: u(), Reason: s(), Anomalies: list(), Events: rng.IntN(1000) - 10, Digest: s(),
	}
	if rng.IntN(4) > 0 {
		p.Rejections = []api.Rejection{}
		for range rng.IntN(3) {
			p.Rejections = append(p.Rejections, api.Rejection{Event: s(), Seq: u(), From: s(), Reason: s(), Explanation: s(), Late: rng.IntN(2) == 0})
		}
	}
	if rng.IntN(4) > 0 {
		p.Fulfillments = []api.Fulfillment{}
		for range rng.IntN(3) {
			f := api.Fulfillment{Event: s(), Seq: u(), From: s(), Late: rng.IntN(2) == 0, Outcome: s(), Response: s(), Anomalies: list(), To: list()}
			for range rng.IntN(3) {
				f.Responses = append(f.Responses, api.Response{Event: s(), Seq: u(), From: s(), Outcome: s()})
			}
			if rng.IntN(4) == 0 {
				f.Responses = []api.Response{}
			}
			p.Fulfillments = append(p.Fulfillments, f)
		}
	}
	if rng.IntN(2) == 0 {
		p.Withdrawal = &api.Withdrawal{Event: s(), Seq: u(), From: s(), Reason: s(), Explanation: s()}
	}
	if rng.IntN(2) == 0 {
		e := tm()
		p.ExpiresAt = &e
	}
	if rng.IntN(3) == 0 {
		for range rng.IntN(3) {
			p.Approvals = append(p.Approvals, api.Approval{Event: s(), Seq: u(), From: s(), Reason: s(), Counted: rng.IntN(2) == 0, Late: rng.IntN(2) == 0, Why: s()})
		}
		if rng.IntN(2) == 0 {
			p.Approvals = []api.Approval{}
		}
	}
	if rng.IntN(3) == 0 {
		b := rng.IntN(2) == 0
		p.Approved = &b
	}
	if rng.IntN(2) == 0 {
		for range 1 + rng.IntN(3) {
			p.Targets = append(p.Targets, api.Target{ID: s(), Sources: list()})
		}
	}
	if rng.IntN(8) == 0 {
		p.Kernel = &api.Kernel{ActionType: api.ActionWrite, Approvers: list(), Form: s()}
	}
	h := &api.HistoryEntry{Seq: u(), ID: s(), Type: s(), Kind: s(), From: s(), At: tm(), Effect: api.Effect(s()), Reason: s(),
		Code: s(), Detail: s(), Anomalies: list(), Target: s(), Text: s(), Outcome: s(), ResolvedSeq: u()}
	r := &fold.EventRef{Seq: u(), Type: ledger.Type(s()), Digest: s(), From: s(), Status: fold.EventStatus(s()), Proposals: list()}
	return p, h, r
}

func FuzzEncoders(f *testing.F) {
	f.Add("id", "<a>&\u2028", []byte(`{"a":1}`), uint64(7), int64(1767225600), int64(0))
	f.Add("", "\xff\x00", []byte(`{ }`), uint64(0), int64(-62135596801), int64(3600))
	f.Fuzz(func(t *testing.T, a, b string, params []byte, n uint64, sec, off int64) {
		at := time.Unix(sec, int64(n%1e9)).In(time.FixedZone("z", int(off%(48*3600))))
		var raw json.RawMessage
		if json.Valid(params) {
			raw = params
		}
		p := &api.Proposal{ID: a, Space: b, State: api.StatePending, Proposer: b, To: []string{a, b}, Method: a, Params: raw,
			CreatedSeq: n, CreatedAt: at, UpdatedAt: at, Rejections: []api.Rejection{{Event: a, From: b, Explanation: a}},
			Fulfillments: []api.Fulfillment{{Event: b, Anomalies: []string{a}}}, Anomalies: []string{}, ExpiresAt: &at, Digest: a}
		h := &api.HistoryEntry{Seq: n, ID: a, Type: b, At: at, Detail: a + b, Anomalies: []string{b}, Text: a}
		r := &fold.EventRef{Seq: n, Digest: a, From: b, Proposals: []string{a}}
		checkEncoders(t, p, h, r)
	})
}

// marshalProposal is the served encoding of p.
func marshalProposal(p *api.Proposal) ([]byte, error) {
	return appendServedProposal(make([]byte, 0, 512+len(p.Params)), p)
}

// marshalHistory is json.Marshal(h).
func marshalHistory(h *api.HistoryEntry) ([]byte, error) {
	return appendMarshalHistory(make([]byte, 0, 192+len(h.Detail)+len(h.Text)), h)
}

// marshalEventRef is json.Marshal(r).
func marshalEventRef(r *fold.EventRef) ([]byte, error) {
	return appendEventRef(make([]byte, 0, 160), r), nil
}
