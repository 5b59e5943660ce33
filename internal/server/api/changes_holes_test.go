package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// TestChangesHoles: GET /v1/changes carries the space's hole changes in
// the window of its page (hole_changes, in stream order), the same as
// /v1/watch's `event: holes`: the opening, the bounding and the healing;
// paged one change at a time, each hole change comes once; a page of one
// proposal or one state carries none.
func TestChangesHoles(t *testing.T) {
	l := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := demoMark
	gap := l.gapWriter(t, ctx)
	l.postMarked("p1", mark("a", "a1"))
	p2 := l.postMarked("p2", mark("b", "b1"))
	p3 := l.postMarked("p3", mark("a", "a1"))
	gap("a", "a1", "p3", p3, true)
	open := gap("b", "b1", "p2", p2, true)    // both down: the hole opens
	p4 := l.postMarked("p4", mark("a", "a2")) // a back: bounded before p4
	h1 := ledger.BridgeMark{Bridge: "h", MEWSpace: "demo", Session: "h1", Prev: p3, Dups: 3, History: true}
	lost := l.postMarked("lost1", h1) // a follower heals it
	last := l.postMarked("p5", mark("b", "b2"))
	want := []string{
		fmt.Sprintf("seq=%d demo opened={p3..open[a,b]} healed={} holes={p3..open[a,b]}", open),
		fmt.Sprintf("seq=%d demo opened={} healed={p4..open[a,b]} holes={p3..p4[a,b]}", p4),
		fmt.Sprintf("seq=%d demo opened={} healed={p3..p4[a,b]} holes={}", lost),
	}
	describe := func(hc api.HoleChange) string {
		return fmt.Sprintf("seq=%d %s opened=%s healed=%s holes=%s", hc.Seq, hc.MEWSpace, windows(hc.Opened), windows(hc.Healed), windows(hc.Holes))
	}
	check := func(what string, got []api.HoleChange) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d hole changes, want %d: %+v", what, len(got), len(want), got)
		}
		for i, hc := range got {
			if d := describe(hc); d != want[i] || hc.Space != "default" {
				t.Fatalf("%s [%d]:\n%s\nwant\n%s", what, i, d, want[i])
			}
		}
	}

	// One page.
	var page api.ChangesPage
	l.get(fmt.Sprintf("/v1/changes?min_seq=%d", last), http.StatusOK, &page)
	if page.More || page.Through < last {
		t.Fatalf("one page: through %d more %v", page.Through, page.More)
	}
	check("one page", page.HoleChanges)

	// Paged one change at a time: every hole change once, and between the
	// proposals' changes of its window.
	var all []api.HoleChange
	for after := uint64(0); ; {
		var p api.ChangesPage
		l.get(fmt.Sprintf("/v1/changes?since_seq=%d&limit=1", after), http.StatusOK, &p)
		for _, hc := range p.HoleChanges {
			if hc.Seq <= after || hc.Seq > p.Through {
				t.Fatalf("hole change at seq %d outside the page (%d, %d]", hc.Seq, after, p.Through)
			}
		}
		all = append(all, p.HoleChanges...)
		if !p.More {
			break
		}
		after = p.Through
	}
	check("paged", all)

	// One proposal, one state: none.
	for _, q := range []string{"proposal=p3", "state=pending"} {
		var p api.ChangesPage
		l.get("/v1/changes?"+q, http.StatusOK, &p)
		if p.HoleChanges == nil || len(p.HoleChanges) != 0 || len(p.Changes) == 0 {
			t.Fatalf("%s: %+v", q, p)
		}
	}
}
