package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/projections/fold"
)

// scriptEvents answers the event index scripts' "events" command: the log so far
// folded into Pebble stores (through the Pipeline in runs of three, so that
// orphans are released across handed-off batches, and event by event), and
// the page GET /v1/events would list for the command's arguments:
//
//	events [space=S] [effect=E] [type=T] [kind=K] [form=F] [from=W]
//	       [proposal=P] [anomaly=A] [tool=O] [reason=R] [code=C] [event=ID]
//	       [since=+Ns] [until=+Ns] [since_seq=N] [until_seq=N] [order=desc] [limit=N]
//
// Both stores must list the same. With limit, every page is listed, each
// headed by "page N:", following the cursors.
func scriptEvents(t *testing.T, td *datadriven.TestData, s *foldscript.Script) (string, bool) {
	t.Helper()
	if td.Cmd != "events" {
		return "", false
	}
	log := s.Log
	var q EventQuery
	for _, a := range td.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		switch a.Key {
		case "space":
			q.Space = v
		case "effect":
			q.Effect = v
		case "type":
			q.Type = v
		case "kind":
			q.Kind = v
		case "form":
			q.Form = v
		case "from":
			q.From = v
		case "proposal":
			q.Proposal = v
		case "anomaly":
			q.Anomaly = v
		case "tool":
			q.Tool = v
		case "reason":
			q.Reason = v
		case "code":
			q.Code = v
		case "event":
			q.ID = v
		case "since", "until":
			d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
			if err != nil {
				t.Fatalf("bad %s %q: %v", a.Key, v, err)
			}
			if a.Key == "since" {
				q.Since = foldscript.Base.Add(d)
			} else {
				q.Until = foldscript.Base.Add(d)
			}
		case "since_seq":
			fmt.Sscan(v, &q.SinceSeq)
		case "until_seq":
			fmt.Sscan(v, &q.UntilSeq)
		case "order":
			q.Desc = v == "desc"
		case "limit":
			fmt.Sscan(v, &q.Limit)
		default:
			t.Fatalf("events: unknown argument %q", a.Key)
		}
	}
	var outs []string
	for _, pipeline := range []bool{true, false} {
		s := openMemStore(t)
		if pipeline {
			pl, err := NewPipeline(s, PipelineOptions{Folder: foldscript.Folder()})
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range runs(log, 0, 3) {
				if err := pl.Fold(run, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := pl.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			foldBatches(t, s, log, 1)
		}
		outs = append(outs, listEventPages(t, s, q))
	}
	if outs[0] != outs[1] {
		t.Fatalf("the event index differs between a pipelined and an event-by-event fold:\n%s\n---\n%s", outs[0], outs[1])
	}
	return outs[0], true
}

// TestEventIndexScripts runs the event index's data-driven scripts
// (testdata/events: the fold scripts' commands and "events"), checking at
// each replay and at the end that the Pebble stores equal the MemState and
// each other, byte for byte, whatever the batch sizes (rebuild equality).
func TestEventIndexScripts(t *testing.T) {
	foldscript.WalkWith(t, filepath.Join("testdata", "events"), compareWithStore, scriptEvents)
}

func listEventPages(t *testing.T, s *Store, q EventQuery) string {
	t.Helper()
	var b strings.Builder
	paged := q.Limit > 0
	for n := 1; ; n++ {
		p, err := s.Events(q)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		if paged {
			fmt.Fprintf(&b, "page %d:\n", n)
		}
		for _, r := range p.Events {
			b.WriteString(formatEventRecord(r))
		}
		if p.NextCursor == "" || !paged {
			break
		}
		q.Cursor = p.NextCursor
	}
	if b.Len() == 0 {
		return "no events\n"
	}
	return b.String()
}

func formatEventRecord(r EventRecord) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s", r.Seq, r.ID, r.Effect)
	if r.Type != "" {
		fmt.Fprintf(&b, " type=%s", r.Type)
	}
	fmt.Fprintf(&b, " kind=%s from=%s", r.Kind, r.From)
	if r.Space != "default" {
		fmt.Fprintf(&b, " space=%s", r.Space)
	}
	if len(r.Effects) > 1 {
		fmt.Fprintf(&b, " effects=%v", r.Effects)
	}
	if len(r.Proposals) > 0 {
		fmt.Fprintf(&b, " proposals=%s", strings.Join(r.Proposals, ","))
	}
	if len(r.Anomalies) > 0 {
		fmt.Fprintf(&b, " anomalies=%s", strings.Join(r.Anomalies, ","))
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", r.Reason)
	}
	if r.Code != "" {
		fmt.Fprintf(&b, " code=%s", r.Code)
	}
	if r.Tool != "" || r.Arg != "" {
		fmt.Fprintf(&b, " tool=%s arg=%q", r.Tool, r.Arg)
	}
	if r.Form != "" {
		fmt.Fprintf(&b, " form=%s", r.Form)
	}
	b.WriteString("\n")
	return b.String()
}

// eventsTestLog is a small log with a proposal, an orphan released by a
// later proposal, and garbage.
func eventsTestLog() []fold.Event {
	at := foldscript.Base
	mk := func(seq uint64, subject, raw string) fold.Event {
		return fold.Event{Seq: seq, Time: at.Add(time.Duration(seq) * time.Second), Subject: subject, Raw: []byte(raw)}
	}
	return []fold.Event{
		mk(1, "ledger.default.p1.proposal.agent", `{"protocol":"mew/v0.4","id":"p1","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"run","arguments":{"command":"ls"}}}}`),
		mk(2, "ledger.default.p2.fulfil.human", `{"protocol":"mew/v0.4","id":"f2","from":"human","kind":"mcp/request","correlation_id":["p2"],"payload":{"method":"tools/call"}}`),
		mk(3, "ledger.default.x.proposal.mallory", `not json`),
		mk(4, "ledger.default.p2.proposal.agent", `{"protocol":"mew/v0.4","id":"p2","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call"}}`),
	}
}

// TestVerifySeesEventIndex: verify (Compare) reports a store whose event
// index differs from a rebuild's — a missing secondary key, a changed
// record — naming the table.
func TestVerifySeesEventIndex(t *testing.T) {
	log := eventsTestLog()
	build := func() *Store {
		s := openMemStore(t)
		foldBatches(t, s, log, 2)
		return s
	}
	a, b := build(), build()
	if d, err := Compare(a, b); err != nil || d != nil {
		t.Fatalf("two folds of one log differ: %+v %v", d, err)
	}
	if err := b.db.Delete(appendU64(eventPostingPrefix(evTool, "run"), 0), nil); err != nil {
		t.Fatal(err)
	}
	d, err := Compare(a, b)
	if err != nil || d == nil || d.Key.Table != TableEventPosting || d.Key.Index != "tool" || d.Key.Value != "run" || d.Key.Seq != 0 {
		t.Fatalf("a missing posting list: %+v %v", d, err)
	}
	b = build()
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagEventIndex}, UpperBound: []byte{tagEventIndex + 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("no 'J' key")
	}
	jk := DecodeKey(it.Key())
	if err := b.db.Delete(it.Key(), nil); err != nil {
		t.Fatal(err)
	}
	_ = it.Close()
	d, err = Compare(a, b)
	if err != nil || d == nil || d.Key.Table != TableEventIndex || d.Key.Index != jk.Index || d.Key.Value != jk.Value || d.Key.Seq != jk.Seq {
		t.Fatalf("a missing event index key %+v: %+v %v", jk, d, err)
	}
	c := build()
	if err := c.db.Set(eventKey(2), []byte(`{"seq":2}`), nil); err != nil {
		t.Fatal(err)
	}
	if d, err := Compare(a, c); err != nil || d == nil || d.Key.Table != TableEvent || d.Key.Seq != 2 {
		t.Fatalf("a changed event record: %+v %v", d, err)
	}
}

// FuzzEventsQuery: any cursor, bounds and filters give a page or an
// ErrBadQuery, never a panic, and a page never holds more than its limit
// nor an event outside the sequence bounds.
func FuzzEventsQuery(f *testing.F) {
	s := openMemStore(f)
	log := eventsTestLog()
	fl := fold.NewFolder()
	b := s.NewBatch()
	for _, ev := range log {
		if _, err := fl.Apply(b, ev); err != nil {
			f.Fatal(err)
		}
	}
	if err := b.Commit(uint64(len(log))); err != nil {
		f.Fatal(err)
	}
	f.Add("", uint64(0), uint64(0), false, 0, "", "")
	f.Add(encodeEventCursor(1, false), uint64(1), uint64(3), false, 1, "applied", "")
	f.Add(encodeEventCursor(4, true), uint64(0), uint64(0), true, 2, "", "agent")
	f.Add("AgAAAAAAAAAAAQ", uint64(5), uint64(2), true, 1000, "orphan", "human")
	f.Fuzz(func(t *testing.T, cursor string, since, until uint64, desc bool, limit int, effect, from string) {
		p, err := s.Events(EventQuery{Cursor: cursor, SinceSeq: since, UntilSeq: until, Desc: desc, Limit: limit, Effect: effect, From: from})
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("not a bad query: %v", err)
			}
			return
		}
		max := limit
		if max == 0 {
			max = DefaultEventLimit
		}
		if len(p.Events) > max {
			t.Fatalf("%d events for limit %d", len(p.Events), limit)
		}
		for i, e := range p.Events {
			if e.Seq < since || (until != 0 && e.Seq > until) {
				t.Fatalf("seq %d outside %d..%d", e.Seq, since, until)
			}
			if i > 0 && (e.Seq > p.Events[i-1].Seq) == desc {
				t.Fatalf("out of order: %d after %d (desc %v)", e.Seq, p.Events[i-1].Seq, desc)
			}
		}
	})
}

// TestAppendMarshalEvent: the event record's encoder writes exactly
// json.Marshal's bytes, whatever the strings hold.
func TestAppendMarshalEvent(t *testing.T) {
	for _, r := range []EventRecord{
		{Seq: 1, At: foldscript.Base, Space: "default", Effects: []api.Effect{}, Entries: []EventEntry{}},
		{Seq: 1 << 60, At: foldscript.Base.Add(123456789), Space: "s<p>&a\u2028ce", Key: "k\x00\xff", ID: "id \"q\"", Type: "proposal", Kind: "mcp/proposal",
			Form: "bid", From: "é", Reason: "unsafe", Method: "tools/call", Tool: "write_file", Arg: "/etc/<hosts>", Digest: "ab",
			Effect: api.EffectLate, Effects: []api.Effect{api.EffectLate, api.EffectApplied}, Proposals: []string{"p1", "p2"}, Anomalies: []string{"a"},
			Code: "c", Detail: "d\n", Entries: []EventEntry{{Key: "p1", Effect: api.EffectLate, Code: "x", Detail: "y", Anomalies: []string{"a"}, Target: "t", Outcome: "o", ResolvedSeq: 9}, {Key: "p2", Effect: api.EffectApplied}}},
		{Seq: 2, At: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), Space: "x"}, // json.Marshal refuses the year: both fail
	} {
		want, werr := json.Marshal(&r)
		got, gerr := appendMarshalEvent([]byte("prefix"), &r)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("errors differ: %v / %v", werr, gerr)
		}
		if werr == nil && string(got) != "prefix"+string(want) {
			t.Fatalf("encoded\n%s\nwant\n%s", got, want)
		}
	}
}
