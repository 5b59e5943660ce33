package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// nextHoles skips the proposals' changes of s up to its next hole change.
func nextHoles(t *testing.T, s *sseStream) (api.HoleChange, sseEvent) {
	t.Helper()
	for {
		ev := s.next()
		if ev.event != "holes" {
			continue
		}
		var hc api.HoleChange
		if err := json.Unmarshal([]byte(ev.raw), &hc); err != nil {
			t.Fatalf("bad hole change %q: %v", ev.raw, err)
		}
		return hc, ev
	}
}

func windows(hs []api.Hole) string {
	var out []string
	for _, h := range hs {
		lo, hi := "start", "open"
		if h.After != nil {
			lo = h.After.ID
		}
		if h.Before != nil {
			hi = h.Before.ID
		}
		out = append(out, lo+".."+hi+"["+strings.Join(h.Recorders, ",")+"]")
	}
	return "{" + strings.Join(out, " ") + "}"
}

func describeHoles(hc api.HoleChange, ev sseEvent) string {
	id := "-"
	if ev.hasID {
		id = ev.id
	}
	return fmt.Sprintf("id=%s %s opened=%s healed=%s holes=%s", id, hc.MEWSpace, windows(hc.Opened), windows(hc.Healed), windows(hc.Holes))
}

// TestWatchHoles: /v1/watch sends `event: holes` when a hole opens (both
// bridges of a MEW space down), when a recorder coming back bounds it,
// and when a --history follower heals it; a watcher that reconnects with
// the Last-Event-ID of the opening gets the rest; a watch of one proposal
// gets none.
func TestWatchHoles(t *testing.T) {
	l := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mark := demoMark
	gap := l.gapWriter(t, ctx)
	live := openWatch(t, ctx, l.url+"/v1/watch", "")
	l.postMarked("p1", mark("a", "a1"))
	l.postMarked("p2", mark("b", "b1"))
	p3 := l.postMarked("p3", mark("a", "a1"))
	gap("a", "a1", "p3", p3, true) // a killed; b recorded through: no hole
	l.postMarked("p5", mark("a", "a2"))
	p6 := l.postMarked("p6", mark("b", "b1"))
	p7 := l.postMarked("p7", mark("a", "a2"))
	gap("a", "a2", "p7", p7, true)
	open := gap("b", "b1", "p6", p6, true) // both down: the hole opens
	hc, ev := nextHoles(t, live)
	if got, want := describeHoles(hc, ev), fmt.Sprintf("id=%d demo opened={p7..open[a,b]} healed={} holes={p7..open[a,b]}", open); got != want || hc.Seq != open || hc.Space != "default" {
		t.Fatalf("opening:\n%s\nwant\n%s", got, want)
	}

	p8 := l.postMarked("p8", mark("a", "a3")) // a back: the hole ends before p8
	l.postMarked("p9", mark("b", "b2"))
	// A --history run over the gateway's log heals it.
	h1 := ledger.BridgeMark{Bridge: "h", MEWSpace: "demo", Session: "h1", Prev: p7, Dups: 7, History: true}
	lost := l.postMarked("lost1", h1)
	want := []string{
		fmt.Sprintf("id=%d demo opened={} healed={p8..open[a,b]} holes={p7..p8[a,b]}", p8),
		fmt.Sprintf("id=%d demo opened={} healed={p7..p8[a,b]} holes={}", lost),
	}
	for name, s := range map[string]*sseStream{
		"live":    live,
		"resumed": openWatch(t, ctx, l.url+"/v1/watch", fmt.Sprint(open)),
		"since":   openWatch(t, ctx, l.url+fmt.Sprintf("/v1/watch?since_seq=%d", open), ""),
	} {
		for _, w := range want {
			hc, ev := nextHoles(t, s)
			if got := describeHoles(hc, ev); got != w {
				t.Fatalf("%s:\n%s\nwant\n%s", name, got, w)
			}
		}
	}
	// A watch of one proposal, or of one state, gets no hole change.
	one := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0&proposal=p8", "")
	if ev := one.next(); ev.event != "change" || ev.change.ID != "p8" {
		t.Fatalf("proposal=p8: %+v", ev)
	}
	l.postMarked("p10", mark("a", "a3"))
	l.postMarked("p11", mark("b", "b2"))
	st := openWatch(t, ctx, l.url+"/v1/watch?since_seq=0&state=pending", "")
	for range 11 {
		if ev := st.next(); ev.event != "change" {
			t.Fatalf("state=pending: %+v", ev)
		}
	}
}
