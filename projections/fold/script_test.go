package fold_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// TestFoldScripts runs the fold's data-driven scripts (testdata/fold, the
// commands are package foldscript's) on the in-memory state. After a
// change of the fold's output, `go test ./projections/fold -run
// TestFoldScripts -rewrite` rewrites the expected outputs (review the
// diff); package projections runs the same scripts against Pebble.
func TestFoldScripts(t *testing.T) {
	foldscript.Walk(t, "testdata/fold", nil)
}

// TestProposalJSONArrays: the lists contract §7 defines as arrays stay arrays
// (never null) through the fold's clone-and-put cycle.
func TestProposalJSONArrays(t *testing.T) {
	s := foldscript.New()
	for _, line := range []string{
		`{"protocol":"mew/v0.4","id":"p","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`,
		`{"protocol":"mew/v0.4","id":"n","from":"b","kind":"chat","correlation_id":["p"],"payload":{"text":"hi"}}`,
	} {
		if _, err := s.Folder.Apply(s.State, s.ParseLine(t, "default", line)); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := s.State.Proposal("default", "p")
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"to":[]`, `"rejections":[]`, `"fulfillments":[]`, `"anomalies":[]`} {
		if !strings.Contains(string(j), field) {
			t.Errorf("proposal JSON lacks %s: %s", field, j)
		}
	}
}

// TestBridgeSessions: envelopes stored with a bridge's mark move its
// record (last stored envelope, session, state recording); a gap of the
// bridge from that envelope puts its hole on the record (state gap); a
// stored message whose mark does not parse, or a gap from before the
// last stored envelope, changes nothing of the kind. Folding the same log
// into a fresh state gives the same records (rebuild-identical).
func TestBridgeSessions(t *testing.T) {
	s := foldscript.New()
	recv := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	mark := ledger.BridgeMark{Bridge: "rec", MEWSpace: "m", Session: "s1", Received: recv}.String()
	var log []fold.Event
	apply := func(ev fold.Event) {
		t.Helper()
		if ev.Bridge != "" && ev.BridgeSeal == "" {
			foldscript.Seal(&ev) // as the ledger's append path seals it
		}
		log = append(log, ev)
		if _, err := s.Folder.Apply(s.State, ev); err != nil {
			t.Fatal(err)
		}
	}
	env := func(id string) string {
		return `{"protocol":"mew/v0.4","id":"` + id + `","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`
	}
	gap := func(last string, lastSeq uint64, session string) fold.Event {
		raw, err := ledger.GapEnvelope(ledger.Gap{Bridge: "rec", MEWSpace: "m", LastEnvelope: last, LastSeq: lastSeq, Session: session,
			DisconnectedAt: recv.Add(time.Duration(len(log)) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		return s.ParseLine(t, "default", "subject=ledger.default.rec.gap.ledger "+string(raw))
	}
	rec := func() *api.BridgeSession {
		r, err := s.State.BridgeSession("default", fold.BridgeKey("rec", "m"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ev := s.ParseLine(t, "default", env("p1"))
	ev.Bridge = mark
	apply(ev)
	ev = s.ParseLine(t, "default", env("p2"))
	ev.Bridge = mark
	apply(ev)
	r := rec()
	if r == nil || r.State != api.BridgeRecording || r.LastEnvelope != "p2" || r.LastSeq != ev.Seq || r.Session != "s1" ||
		r.LastReceivedAt == nil || !r.LastReceivedAt.Equal(recv) || r.Envelopes != 2 {
		t.Fatalf("after two marked envelopes: %+v", r)
	}
	bad := s.ParseLine(t, "default", env("p3"))
	bad.Bridge = "b=&s="
	apply(bad)
	apply(gap("p1", 1, "s1")) // starts before the last stored: not the hole since it
	if r := rec(); r.State != api.BridgeRecording || r.LastEnvelope != "p2" || r.Gaps != 1 {
		t.Fatalf("after an older gap and a bad mark: %+v", r)
	}
	g := gap("p2", ev.Seq, "s1")
	apply(g)
	if r := rec(); r.State != api.BridgeGap || r.GapSeq != g.Seq || r.Gaps != 2 {
		t.Fatalf("after the gap from the last stored: %+v", r)
	}
	ev = s.ParseLine(t, "default", env("p4"))
	ev.Bridge = ledger.BridgeMark{Bridge: "rec", MEWSpace: "m", Session: "s2"}.String()
	apply(ev)
	if r := rec(); r.State != api.BridgeRecording || r.Session != "s2" || r.LastEnvelope != "p4" || r.LastReceivedAt != nil || r.GapSeq != 0 {
		t.Fatalf("after the next session's envelope: %+v", r)
	}
	again := foldscript.New()
	for _, ev := range log {
		if _, err := again.Folder.Apply(again.State, ev); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := s.State.Dump(), again.State.Dump(); a != b {
		t.Errorf("refold differs:\n%s\n---\n%s", a, b)
	}
}
