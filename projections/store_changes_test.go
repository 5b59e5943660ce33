package projections

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/projections/fold"
)

// changeLog folds lines (one envelope each) into a fresh store, committing
// every batch events, and returns the change index as lines.
func changeLog(t *testing.T, lines []string, batch int) (string, *Store) {
	t.Helper()
	s := openMemStore(t)
	f := fold.NewFolder()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var evs []fold.Event
	for i, l := range lines {
		at := t0.Add(time.Duration(i) * time.Second)
		evs = append(evs, fold.Event{Seq: uint64(i + 1), Time: at, Subject: foldscript.DefaultSubject("default", []byte(l), at), Raw: []byte(l)})
	}
	for lo := 0; lo < len(evs); lo += batch {
		hi := min(lo+batch, len(evs))
		b := s.NewBatch()
		for _, ev := range evs[lo:hi] {
			if _, err := f.Apply(b, ev); err != nil {
				t.Fatal(err)
			}
		}
		mustCommit(t, b, evs[hi-1].Seq)
	}
	cs, through, more, err := s.Changes(0, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if more || through != uint64(len(evs)) {
		t.Fatalf("Changes: through %d more %v, want %d false", through, more, len(evs))
	}
	var out strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&out, "%d %s %s %s→%s %v +%v event=%s by=%s\n", c.Seq, c.Space, c.ID, c.PrevState, c.State, c.Anomalies, c.Added, c.Event, c.DecidedBy)
	}
	return out.String(), s
}

// TestChangeIndex: one change per (arrival, proposal) whose state or
// anomalies changed, none for events that change neither, the same
// whatever the batch size, and Changes resumes after a sequence.
func TestChangeIndex(t *testing.T) {
	lines := []string{
		`{"protocol":"mew/v0.4","id":"p1","from":"a","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"f1","from":"h","to":["t"],"kind":"mcp/request","correlation_id":["p1"],"payload":{"method":"tools/call","params":{"x":1}}}`,
		`{"protocol":"mew/v0.4","id":"r1","from":"t","kind":"mcp/response","correlation_id":["f1"],"payload":{"result":{}}}`,
		`{"protocol":"mew/v0.4","id":"f2","from":"h2","to":["t"],"kind":"mcp/request","correlation_id":["p1"],"payload":{"method":"tools/call","params":{"x":1}}}`,
		// An orphaned reject, then its proposal: one change at the proposal's arrival.
		`{"protocol":"mew/v0.4","id":"j1","from":"fs","kind":"mcp/reject","correlation_id":["p2"],"payload":{"reason":"unsafe"}}`,
		`{"protocol":"mew/v0.4","id":"p2","from":"a","kind":"mcp/proposal","payload":{"method":"tools/call"}}`,
		`{"protocol":"mew/v0.4","id":"c1","from":"fs","kind":"chat","correlation_id":["j1"],"payload":{"text":"why"}}`,
	}
	want := `1 default p1 →pending [] +[] event=p1 by=
2 default p1 pending→fulfilled [] +[] event=f1 by=h
4 default p1 fulfilled→fulfilled [multiple_fulfillments] +[multiple_fulfillments] event= by=
6 default p2 →rejected [] +[] event=j1 by=fs
`
	var s *Store
	for _, batch := range []int{1, 2, 3, len(lines)} {
		got, st := changeLog(t, lines, batch)
		if got != want {
			t.Fatalf("batch %d: changes\n%s\nwant\n%s", batch, got, want)
		}
		s = st
	}
	cs, through, more, err := s.Changes(2, 1, 0, nil)
	if err != nil || len(cs) != 1 || cs[0].Seq != 4 || through != 4 || !more {
		t.Fatalf("Changes(after 2, limit 1) = %+v through %d more %v err %v; want seq 4 through 4 more", cs, through, more, err)
	}
	cs, through, more, err = s.Changes(0, 0, 0, func(c *api.Change) bool { return c.ID == "p2" })
	if err != nil || len(cs) != 1 || cs[0].ID != "p2" || through != 7 || more {
		t.Fatalf("Changes(keep p2) = %+v through %d more %v err %v", cs, through, more, err)
	}
	if cs, through, _, _ := s.Changes(7, 0, 0, nil); len(cs) != 0 || through != 7 {
		t.Fatalf("Changes(after 7) = %+v through %d", cs, through)
	}
	it, err := s.rawIter()
	if err != nil {
		t.Fatal(err)
	}
	defer it.close()
	for ; it.valid; it.next() {
		if ki := DecodeKey(it.key()); ki.Table == api.TableUnknown {
			t.Fatalf("undecodable key %s", ki)
		}
	}
}

// TestChangeEncoding: the change index's encoder writes json.Marshal's
// bytes.
func TestChangeEncoding(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, c := range []api.Change{
		{Seq: 1, Space: "default", ID: "p1", State: api.StatePending, Anomalies: []string{}, Event: "p1", At: at},
		{Seq: 2, Space: "sp <&>\u2028", ID: "\x00\"q\"", State: api.StateFulfilled, PrevState: api.StatePending,
			Anomalies: []string{"a", "b"}, Added: []string{"b"}, Event: "f1", DecidedBy: "h\u00fc", At: at.In(time.FixedZone("x", 3600))},
		{Seq: 3, ID: "y", At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		want, wantErr := json.Marshal(&c)
		got, err := appendMarshalChange([]byte("prefix"), &c)
		if (err != nil) != (wantErr != nil) || string(got) != "prefix"+string(want) {
			t.Fatalf("change %+v: %s (%v), want %s (%v)", c, got, err, want, wantErr)
		}
	}
}
