package projections

import (
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// TestOrphansWaitingCountsEveryList checks the invariant the fold relies
// on to skip reading orphan lists: after every event, each space's
// Stats.OrphansWaiting equals the number of entries in its orphan lists
// (so a space whose counter is 0 has no list to read).
func TestOrphansWaitingCountsEveryList(t *testing.T) {
	st := fold.NewMemState()
	f := fold.NewFolder()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	most := int64(0) // the most orphans seen waiting at once
	fold := func(space string, raw []byte) {
		t.Helper()
		seq++
		subj := "ledger." + space + ".x.proposal.y"
		if d, err := ledger.Decode(raw, ledger.DecodeOptions{}); err == nil && d.Type.Valid() {
			subj = subjects.Event{Space: space, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		if _, err := f.Apply(st, fold.Event{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Subject: subj, Raw: raw}); err != nil {
			t.Fatal(err)
		}
		for _, sp := range st.Spaces() {
			s, _ := st.Stats(sp)
			if s == nil {
				continue
			}
			most = max(most, s.OrphansWaiting)
			if n := int64(st.WaitingOrphans(sp)); s.OrphansWaiting != n {
				t.Fatalf("seq %d: space %q counts %d orphans waiting, its lists hold %d", seq, sp, s.OrphansWaiting, n)
			}
		}
	}
	for i, o := range []workload.Options{
		{Seed: 1, Disorder: 30, Duplicates: 5, Foreign: 10},
		{Seed: 2, Disorder: 60, Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 15, Response: 15, Chat: 15}},
		{Seed: 3, Disorder: 10, Prefix: "b-"},
	} {
		g := workload.New(o)
		for range 3000 {
			fold([]string{"default", "other"}[i%2], g.Next())
		}
	}
	// A response and a chat naming events that never come, and a chain
	// resolved backwards: chat -> reject -> proposal.
	for _, raw := range []string{
		`{"protocol":"mew/v0.4","id":"r1","from":"a","kind":"mcp/response","correlation_id":["nope"],"payload":{"result":{}}}`,
		`{"protocol":"mew/v0.4","id":"c1","from":"a","kind":"chat","correlation_id":["rj1"],"payload":{"text":"why"}}`,
		`{"protocol":"mew/v0.4","id":"rj1","from":"a","kind":"mcp/reject","correlation_id":["pp1","pp2"],"payload":{"reason":"unsafe"}}`,
		`{"protocol":"mew/v0.4","id":"pp2","from":"b","kind":"mcp/proposal","payload":{"method":"m"}}`,
		`{"protocol":"mew/v0.4","id":"pp1","from":"b","kind":"mcp/proposal","payload":{"method":"m"}}`,
	} {
		fold("default", []byte(raw))
	}
	if most < 3 {
		t.Fatalf("at most %d orphans waited at once: the workloads did not exercise the lists", most)
	}
}
