package projections_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// foldPrologue is valid traffic the fuzzed events land on: a fulfilled
// proposal with a response, a rejected one with an explanation, and a
// pending one withdrawn after the fuzzed events.
var foldPrologue = []struct{ subject, raw string }{
	{"ledger.default.p-1.proposal.alice", `{"protocol":"mew/v0.4","id":"p-1","from":"alice","to":["fs"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"path":"/"}}}`},
	{"ledger.default.p-1.fulfil.human", `{"protocol":"mew/v0.4","id":"f-1","from":"human","to":["fs"],"kind":"mcp/request","correlation_id":["p-1"],"payload":{"method":"tools/call","params":{"path":"/"}}}`},
	{"ledger.default.f-1.response.fs", `{"protocol":"mew/v0.4","id":"resp-1","from":"fs","kind":"mcp/response","correlation_id":["f-1"],"payload":{"result":{}}}`},
	{"ledger.default.p-2.proposal.bob", `{"protocol":"mew/v0.4","id":"p-2","from":"bob","kind":"mcp/proposal","payload":{"method":"m"}}`},
	{"ledger.default.p-2.reject.fs", `{"protocol":"mew/v0.4","id":"r-2","from":"fs","kind":"mcp/reject","correlation_id":["p-2"],"payload":{"reason":"unsafe"}}`},
	{"ledger.default.p-3.proposal.carol", `{"protocol":"mew/v0.4","id":"p-3","from":"carol","kind":"mcp/proposal","payload":{"method":"m","ttl_ms":60000}}`},
}

var foldEpilogue = struct{ subject, raw string }{
	"ledger.default.p-3.withdraw.carol", `{"protocol":"mew/v0.4","id":"w-3","from":"carol","kind":"mcp/withdraw","correlation_id":["p-3"],"payload":{"reason":"busy"}}`,
}

// foldAll folds the prologue, the fuzzed events and the epilogue into a
// fresh MemState and returns it with every outcome and the spaces touched.
func foldAll(t *testing.T, events [][2]string) (*fold.MemState, []fold.Outcome, map[string]bool) {
	t.Helper()
	st := fold.NewMemState()
	f := fold.NewFolder()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var all []fold.Outcome
	spaces := map[string]bool{}
	seq := uint64(0)
	fold := func(subject, raw string) {
		seq++
		if ev, err := subjects.ParseEvent(subject); err == nil {
			spaces[ev.Space] = true
		} else if parts := strings.SplitN(subject, ".", 5); len(parts) > 1 {
			spaces[parts[1]] = true
		} else {
			spaces[""] = true
		}
		out, err := f.Apply(st, fold.Event{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Subject: subject, Raw: []byte(raw)})
		if err != nil {
			t.Fatalf("seq %d (%q): the fold failed on a healthy state: %v", seq, subject, err)
		}
		all = append(all, out...)
	}
	for _, e := range foldPrologue {
		fold(e.subject, e.raw)
	}
	for _, e := range events {
		fold(e[0], e[1])
	}
	fold(foldEpilogue.subject, foldEpilogue.raw)
	return st, all, spaces
}

// snapshot is everything a MemState holds for some spaces, as JSON.
func snapshot(t *testing.T, st *fold.MemState, spaces map[string]bool) string {
	t.Helper()
	type space struct {
		Proposals []*api.Proposal
		History   map[string][]api.HistoryEntry
		Stats     *api.Stats
	}
	out := map[string]space{}
	for sp := range spaces {
		s := space{Proposals: st.Proposals(sp), History: map[string][]api.HistoryEntry{}}
		for _, k := range st.HistoryKeys(sp) {
			s.History[k] = st.History(sp, k)
		}
		s.Stats, _ = st.Stats(sp)
		out[sp] = s
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzFold folds two arbitrary messages, under arbitrary subjects, between
// valid traffic: the fold never fails or panics on what a client can put
// on a LEDGER subject (contract §8), is deterministic, counts every message
// exactly once in its space's statistics, and never touches the proposals
// of the prologue through a subject that does not name them.
func FuzzFold(f *testing.F) {
	if cases, err := badinput.LoadDefault(); err == nil {
		// Every fifth case: a seed corpus of hundreds slows fuzzing's
		// start-up (coverage baseline) to tens of seconds.
		for i, c := range cases {
			if len(c.Data) > 16<<10 || i%5 != 0 {
				continue
			}
			subject := []string{"ledger.default.p-3.withdraw.carol", "ledger.default.p-1.fulfil.human", "ledger.~.~.~.~", "ledger.default.~YQ.reject.x"}[i%4]
			if d, err := ledger.Decode(c.Data, ledger.DecodeOptions{}); err == nil && i%2 == 0 {
				subject = subjects.Event{Space: ledger.DefaultSpace, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
			}
			f.Add(subject, c.Data, "ledger.default.p-2.reject.fs", []byte(foldPrologue[4].raw))
		}
	}
	f.Add("ledger.default.p-3.reject.fs", []byte(`{"protocol":"mew/v0.4","id":"r-3","from":"fs","kind":"mcp/reject","correlation_id":["p-3"]}`),
		"ledger.default.p-3.expire.ledger", []byte(`{"protocol":"mew/v0.4","id":"expire:default/p-3","from":"ledger","kind":"ledger/expire","correlation_id":["p-3"]}`))
	f.Add("ledger.default.p-1.proposal.alice", []byte(foldPrologue[0].raw), "ledger.default.x.withdraw.y", []byte("{"))
	// The seeds' lifecycle forms (contract §2), gaps and reused ids.
	f.Add("ledger.default.p-1.note.fs", []byte(`{"protocol":"mew/v0.4","id":"st-1","from":"fs","correlation_id":["p-1"],"kind":"meup.lifecycle","payload":{"operation":"status","status":"queued"}}`),
		"ledger.default.p-9.note.a", []byte(`{"protocol":"mew/v0.4","id":"b-1","from":"a","kind":"bid","payload":{"proposal_id":"p-9","confidence":0.5,"estimated_time":10}}`))
	f.Add("ledger.default.p-2.withdraw.alice", []byte(`{"protocol":"mcpx/v0.1","id":"s-1","from":"alice","kind":"proposal/status","payload":{"proposalId":"p-2","status":"withdrawn"}}`),
		"ledger.default.p-1.withdraw.alice", []byte(`{"protocol":"mew/v0.4","id":"c-1","from":"alice","kind":"mcp","payload":{"method":"notifications/cancelled","params":{"requestId":"p-1"}}}`))
	f.Add("ledger.default.p-5.proposal.a", []byte(`{"protocol":"mew/v0.4","id":"p-5","from":"a","kind":"proposal","payload":{"method":"m","ttl":10,"targeting":{"preferred":"t","exclusive":true,"exclusive_timeout":5}}}`),
		"ledger.default.p-5.fulfil.x", []byte(`{"protocol":"mew/v0.4","id":"f-5","from":"x","kind":"mcp/request","correlation_id":["p-5"],"payload":{"method":"m"}}`))
	f.Add("ledger.default.rec.gap.ledger", []byte(`{"protocol":"mew/v0.4","id":"gap:rec/1","from":"ledger","kind":"ledger/gap","payload":{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z"}}`),
		"ledger.default.p-2.reject.fs", []byte(`{"protocol":"mew/v0.4","id":"r-2","from":"fs","kind":"mcp/reject","correlation_id":["p-2"],"payload":{"reason":"other"}}`))

	f.Fuzz(func(t *testing.T, subject1 string, raw1 []byte, subject2 string, raw2 []byte) {
		events := [][2]string{{subject1, string(raw1)}, {subject2, string(raw2)}}
		st, outs, spaces := foldAll(t, events)

		// Deterministic: the same log gives the same projection.
		st2, outs2, _ := foldAll(t, events)
		if !reflect.DeepEqual(outs, outs2) || snapshot(t, st, spaces) != snapshot(t, st2, spaces) {
			t.Fatal("two folds of the same log differ")
		}

		// Every message counted once.
		var events64 int64
		for sp := range spaces {
			s, _ := st.Stats(sp)
			if s != nil {
				events64 += s.Events
			}
		}
		if want := int64(len(foldPrologue) + 2 + 1); events64 != want {
			t.Fatalf("stats count %d events in spaces %q, %d were folded", events64, keys(spaces), want)
		}

		// A proposal of the prologue changes only through an event that
		// names it or an event of its chain (its fulfilment, rejection):
		// by the subject's key, or by the envelope's id or targets.
		chain := map[string][]string{"p-1": {"p-1", "f-1", "resp-1"}, "p-2": {"p-2", "r-2"}}
		named := func(id string) bool {
			for _, e := range events {
				refs := []string{}
				if ev, err := subjects.ParseEvent(e[0]); err == nil && ev.Space == ledger.DefaultSpace {
					refs = append(refs, ev.Key)
				}
				if d, err := ledger.Decode([]byte(e[1]), ledger.DecodeOptions{}); err == nil {
					refs = append(refs, d.Env.ID, d.Key)
					refs = append(refs, d.Targets...)
				}
				for _, r := range refs {
					if slices.Contains(chain[id], r) {
						return true
					}
				}
			}
			return false
		}
		ref, _, _ := foldAll(t, nil)
		for _, id := range []string{"p-1", "p-2"} {
			if named(id) {
				continue
			}
			a, _ := ref.Proposal(ledger.DefaultSpace, id)
			b, _ := st.Proposal(ledger.DefaultSpace, id)
			if a == nil || b == nil {
				t.Fatalf("%s vanished", id)
			}
			x, y := *a, *b
			x.UpdatedSeq, y.UpdatedSeq, x.UpdatedAt, y.UpdatedAt = 0, 0, time.Time{}, time.Time{}
			if !reflect.DeepEqual(essence(&x), essence(&y)) {
				t.Fatalf("%s changed by events whose subjects do not name it: %q %q", id, subject1, subject2)
			}
		}
	})
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
