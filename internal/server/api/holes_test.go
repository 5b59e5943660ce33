package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// postMarked POSTs one proposal from bridge session mark and returns its seq.
func (l *ledgerT) postMarked(id string, mark ledger.BridgeMark) uint64 {
	l.t.Helper()
	env := fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`, id)
	req, err := http.NewRequest(http.MethodPost, l.url+"/v1/events", strings.NewReader(env))
	if err != nil {
		l.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ledger.HeaderBridge, mark.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r api.AppendResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted || r.Seq == 0 {
		l.t.Fatalf("POST %s: %d %+v %v", id, resp.StatusCode, r, err)
	}
	return r.Seq
}

// TestHolesRoute: two bridges record a MEW space; a crash of one that
// the other recorded through is a covered gap (GET /v1/gaps covered,
// covered_by), a moment both were down is the one hole (GET /v1/holes:
// the envelopes on either side, the recorders in gap), and /v1/stats
// counts both; a follower's later reading of the gateway's log covers
// the hole.
func TestHolesRoute(t *testing.T) {
	l := start(t)
	ctx := context.Background()
	mark := demoMark
	gap := l.gapWriter(t, ctx)
	l.postMarked("p1", mark("a", "a1"))
	l.postMarked("p2", mark("b", "b1"))
	p3 := l.postMarked("p3", mark("a", "a1"))
	l.postMarked("p4", mark("b", "b1"))
	gap("a", "a1", "p3", p3, true) // a was killed, and came back
	l.postMarked("p5", mark("a", "a2"))
	p6 := l.postMarked("p6", mark("b", "b1"))
	// both down: b killed after p6, a after p7; both come back
	p7 := l.postMarked("p7", mark("a", "a2"))
	gap("a", "a2", "p7", p7, true)
	gap("b", "b1", "p6", p6, true)
	p8 := l.postMarked("p8", mark("a", "a3"))
	last := l.postMarked("p9", mark("b", "b2"))

	var gs api.Gaps
	l.get(fmt.Sprintf("/v1/gaps?min_seq=%d", last), http.StatusOK, &gs)
	if len(gs.Gaps) != 3 || !gs.Gaps[0].Covered || fmt.Sprint(gs.Gaps[0].CoveredBy) != "[b]" || gs.Gaps[1].Covered || gs.Gaps[2].Covered {
		t.Fatalf("gaps: %+v", gs.Gaps)
	}
	var hs api.Holes
	l.get("/v1/holes?mew_space=demo", http.StatusOK, &hs)
	if len(hs.Holes) != 1 || len(hs.Recorders) != 2 {
		t.Fatalf("holes: %+v", hs)
	}
	h := hs.Holes[0]
	if h.After == nil || h.After.Seq != p7 || h.After.ID != "p7" || h.After.At == nil || h.Before == nil || h.Before.Seq != p8 ||
		h.Before.ID != "p8" || h.Open || fmt.Sprint(h.Recorders) != "[a b]" || len(h.Gaps) != 2 || h.MEWSpace != "demo" {
		t.Fatalf("hole: %+v", h)
	}
	var st api.Stats
	l.get("/v1/stats", http.StatusOK, &st)
	if st.Holes != 1 || st.CoveredGaps != 1 || st.Gaps != 3 {
		t.Fatalf("stats: holes %d covered %d gaps %d", st.Holes, st.CoveredGaps, st.Gaps)
	}
	var none api.Holes
	l.get("/v1/holes?mew_space=other", http.StatusOK, &none)
	if none.Holes == nil || len(none.Holes) != 0 || none.Recorders == nil || len(none.Recorders) != 0 {
		t.Fatalf("other MEW space: %+v", none)
	}

	// A --history run over the gateway's log: answered duplicate up to
	// p7, stores what was lost, then duplicates to the end, and stops.
	h1 := ledger.BridgeMark{Bridge: "h", MEWSpace: "demo", Session: "h1", Prev: p7, Dups: 7, History: true}
	l.postMarked("lost1", h1)
	l.postMarked("lost2", h1)
	end := gap("h", "h1", "p9", last, false)
	l.get(fmt.Sprintf("/v1/holes?min_seq=%d", end), http.StatusOK, &hs)
	if len(hs.Holes) != 0 {
		t.Fatalf("holes after healing: %+v", hs.Holes)
	}
	l.get("/v1/gaps", http.StatusOK, &gs)
	if len(gs.Gaps) != 4 || !gs.Gaps[1].Covered || fmt.Sprint(gs.Gaps[1].CoveredBy) != "[h]" || !gs.Gaps[2].Covered || gs.Gaps[3].Covered {
		t.Fatalf("gaps after healing: %+v", gs.Gaps)
	}
	l.get("/v1/stats", http.StatusOK, &st)
	if st.Holes != 0 || st.CoveredGaps != 3 {
		t.Fatalf("stats after healing: holes %d covered %d", st.Holes, st.CoveredGaps)
	}
	var bs api.Bridges
	l.get("/v1/bridges?bridge=h", http.StatusOK, &bs)
	if len(bs.Bridges) != 1 || bs.Bridges[0].Duplicates != 7 || bs.Bridges[0].Envelopes != 2 || !bs.Bridges[0].History {
		t.Fatalf("follower: %+v", bs.Bridges)
	}
	l.wantError(http.MethodGet, "/v1/holes?bridge=a", "", nil, http.StatusBadRequest, api.CodeUnknownParameter, "bridge")
}

// demoMark is a bridge mark of the MEW space "demo".
func demoMark(b, s string) ledger.BridgeMark {
	return ledger.BridgeMark{Bridge: b, MEWSpace: "demo", Session: s}
}

// gapWriter returns a function appending a gap of bridge b's session s in
// the MEW space "demo" (its window from the envelope lastID at last; with
// reconnected, closed a millisecond after it opened), each a second after
// the one before; it returns the gap event's sequence.
func (l *ledgerT) gapWriter(t *testing.T, ctx context.Context) func(b, s, lastID string, last uint64, reconnected bool) uint64 {
	at := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	n := 0
	return func(b, s, lastID string, last uint64, reconnected bool) uint64 {
		t.Helper()
		n++
		g := ledger.Gap{Bridge: b, MEWSpace: "demo", Session: s, LastEnvelope: lastID, LastSeq: last,
			DisconnectedAt: at.Add(time.Duration(n) * time.Second), Reason: "test"}
		if reconnected {
			g.ReconnectedAt = g.DisconnectedAt.Add(time.Millisecond)
		}
		raw, err := ledger.GapEnvelope(g)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.app.Appender().AppendSystem(ctx, "", raw)
		if err != nil {
			t.Fatal(err)
		}
		return res.Seq
	}
}
