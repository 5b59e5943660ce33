package projections

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// scriptEvents answers the fold scripts' "events" command: the log so far
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
func scriptEvents(t *testing.T, td *datadriven.TestData, log []Event) string {
	t.Helper()
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
				q.Since = scriptBase.Add(d)
			} else {
				q.Until = scriptBase.Add(d)
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
			pl, err := NewPipeline(s, PipelineOptions{})
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
	return outs[0]
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
