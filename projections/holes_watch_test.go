package projections

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/projections/fold"
)

// holesLog is fold/testdata/fold/holes.txt's story: bridges a and b
// record MEW space demo; both go down (a after seq 10, b after 9) and
// come back (their gaps at 11 and 12, their first envelopes at 13 and
// 14); a --history follower then reads the gateway's log (answered
// duplicate up to seq 10) and stores what was lost.
var holesLog = []string{
	`mark=a/demo/a1 {"protocol":"mew/v0.4","id":"p1","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=b/demo/b1 {"protocol":"mew/v0.4","id":"p2","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=a/demo/a1 {"protocol":"mew/v0.4","id":"p3","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=b/demo/b1 {"protocol":"mew/v0.4","id":"p4","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=b/demo/b1 {"protocol":"mew/v0.4","id":"p5","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=b/demo/b1 {"protocol":"mew/v0.4","id":"p6","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`{"protocol":"mew/v0.4","id":"gap:a/10/a1","from":"ledger","kind":"ledger/gap","payload":{"bridge":"a","mew_space":"demo","last_envelope":"p3","last_seq":3,"disconnected_at":"2026-11-24T05:00:10Z","reason":"crash","session":"a1","reconnected_at":"2026-11-24T05:00:11Z"}}`,
	`mark=a/demo/a2 {"protocol":"mew/v0.4","id":"p7","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=b/demo/b1 {"protocol":"mew/v0.4","id":"p8","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=a/demo/a2/d=1 {"protocol":"mew/v0.4","id":"p9","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`{"protocol":"mew/v0.4","id":"gap:a/20/a2","from":"ledger","kind":"ledger/gap","payload":{"bridge":"a","mew_space":"demo","last_envelope":"p9","last_seq":10,"disconnected_at":"2026-11-24T05:00:20Z","reason":"crash","session":"a2","reconnected_at":"2026-11-24T05:00:21Z"}}`,
	`{"protocol":"mew/v0.4","id":"gap:b/21/b1","from":"ledger","kind":"ledger/gap","payload":{"bridge":"b","mew_space":"demo","last_envelope":"p8","last_seq":9,"disconnected_at":"2026-11-24T05:00:21Z","reason":"crash","session":"b1","reconnected_at":"2026-11-24T05:00:22Z"}}`,
	`mark=a/demo/a3 {"protocol":"mew/v0.4","id":"p12","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=b/demo/b2/d=2 {"protocol":"mew/v0.4","id":"p13","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=h/demo/h1/p=10/d=9/h {"protocol":"mew/v0.4","id":"m10","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`mark=h/demo/h1/d=9/h {"protocol":"mew/v0.4","id":"m11","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`,
	`{"protocol":"mew/v0.4","id":"gap:h/30/h1","from":"ledger","kind":"ledger/gap","payload":{"bridge":"h","mew_space":"demo","last_envelope":"p13","last_seq":14,"disconnected_at":"2026-11-24T05:00:30Z","reason":"bridge stopped","session":"h1"}}`,
}

// formatHoles is a list of holes as windows: after..before (open: "open").
func formatHoles(hs []api.Hole) string {
	var parts []string
	for _, h := range hs {
		lo, hi := "start", "open"
		if h.After != nil {
			lo = fmt.Sprintf("%d(%s)", h.After.Seq, h.After.ID)
		}
		if h.Before != nil {
			hi = fmt.Sprintf("%d(%s)", h.Before.Seq, h.Before.ID)
		}
		parts = append(parts, fmt.Sprintf("%s..%s[%s]", lo, hi, strings.Join(h.Recorders, ",")))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// TestHoleChanges: the hole change index says when the one hole opened
// (when the last recorder up reported its gap: open, nobody back yet),
// when a recorder coming back bounded it, and when the follower healed
// it — the same whatever the batch sizes (a rebuild), and the 'U' and 'W'
// records are byte-identical (TestFoldScriptsOnStore checks that for
// every script).
func TestHoleChanges(t *testing.T) {
	sc := foldscript.New()
	var log []fold.Event
	for _, l := range holesLog {
		log = append(log, sc.ParseLine(t, "default", l))
	}
	want := strings.Join([]string{
		"12 demo opened={10(p9)..open[a,b]} healed={} holes={10(p9)..open[a,b]}",
		"13 demo opened={} healed={13(p12)..open[a,b]} holes={10(p9)..13(p12)[a,b]}",
		"15 demo opened={} healed={10(p9)..13(p12)[a,b]} holes={}",
	}, "\n")
	var first string
	for _, size := range []int{1, 4, len(log)} {
		s := openMemStore(t)
		foldBatches(t, s, log, size)
		for _, after := range []uint64{0, 12} {
			cs, err := s.HoleChanges("default", after, s.AppliedSeq())
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, c := range cs {
				lines = append(lines, fmt.Sprintf("%d %s opened=%s healed=%s holes=%s", c.Seq, c.MEWSpace, formatHoles(c.Opened), formatHoles(c.Healed), formatHoles(c.Holes)))
			}
			got := strings.Join(lines, "\n")
			if after == 12 {
				if w := want[strings.Index(want, "\n13 ")+1:]; got != w {
					t.Fatalf("batches of %d, after 12:\n%s\nwant\n%s", size, got, w)
				}
				continue
			}
			if got != want {
				t.Fatalf("batches of %d: hole changes\n%s\nwant\n%s", size, got, want)
			}
		}
		if d := dumpStore(t, s); first == "" {
			first = d
		} else if d != first {
			t.Fatalf("the store folded in batches of %d differs from the one folded event by event", size)
		}
	}
}

// TestWithoutCoverageNoHoleWork: a fold WithoutCoverage (the coverage
// figure's baseline) turns the batch's hole work off too: the holes
// story folds with no hole change and no 'U' record.
func TestWithoutCoverageNoHoleWork(t *testing.T) {
	sc := foldscript.New()
	var log []fold.Event
	for _, l := range holesLog {
		log = append(log, sc.ParseLine(t, "default", l))
	}
	s := openMemStore(t)
	f := foldscript.Folder()
	f.WithoutCoverage = true
	b := s.NewBatch()
	for _, ev := range log {
		if _, err := f.Apply(b, ev); err != nil {
			t.Fatalf("fold seq %d: %v", ev.Seq, err)
		}
	}
	if err := b.Commit(log[len(log)-1].Seq); err != nil {
		t.Fatal(err)
	}
	cs, err := s.HoleChanges("default", 0, s.AppliedSeq())
	if err != nil || len(cs) != 0 {
		t.Fatalf("hole changes %+v %v, want none", cs, err)
	}
	for _, line := range strings.Split(dumpStore(t, s), "\n") {
		if strings.HasPrefix(line, `"`+string(rune(tagHoles))) || strings.HasPrefix(line, `"`+string(rune(tagHoleChange))) {
			t.Fatalf("store holds a hole record: %s", line)
		}
	}
}
