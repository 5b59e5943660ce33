package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// liveDir holds the two captures of the real gateway with a live bridge
// (see its README): a gateway restart, and streams with invites.
var liveDir = filepath.Join(capturesDir, "live-bridge")

type liveExpected struct {
	Proposals map[string]expectedProposal `json:"proposals"`
	Scenarios map[string]struct {
		scenario
		Gaps struct {
			LiveRunning   int        `json:"live_running"`
			LiveAfterStop int        `json:"live_after_stop"`
			History       int        `json:"history"`
			Between       [][]string `json:"between"`
			AbsentIDs     []string   `json:"absent_ids"`
		} `json:"gaps"`
		EventCounts map[string]int64 `json:"event_counts"`
	} `json:"scenarios"`
}

func loadLive(t *testing.T) liveExpected {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(liveDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e liveExpected
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Scenarios) != 2 {
		t.Fatalf("%d live scenarios, want 2", len(e.Scenarios))
	}
	return e
}

// TestFilterOnLiveCaptures: the filter appends the lifecycle lines of the
// live captures but the chat threaded under a plain chat (which would be
// an orphan for ever), and counts stream data (binary on the wire) as
// #stream#.
func TestFilterOnLiveCaptures(t *testing.T) {
	e := loadLive(t)
	for name, sc := range e.Scenarios {
		t.Run(name, func(t *testing.T) {
			lines := readLines(t, filepath.Join(liveDir, sc.File))
			if len(lines) != sc.Envelopes {
				t.Fatalf("%d lines, expected.json says %d", len(lines), sc.Envelopes)
			}
			want := map[int]bool{}
			for _, l := range sc.Lifecycle {
				want[l.Line] = true
			}
			for _, o := range sc.Orphans {
				want[o.Line] = false
			}
			f := bridge.NewFilter(nil)
			for i, l := range lines {
				v := f.Classify(l)
				if v.Append != want[i+1] {
					t.Errorf("line %d (%s %s): append %v (%s), want %v", i+1, v.Kind, v.ID, v.Append, v.Skip, want[i+1])
				}
				if l[0] == '#' && v.Kind != bridge.KindStream {
					t.Errorf("line %d: kind %s, want %s", i+1, v.Kind, bridge.KindStream)
				}
			}
		})
	}
}

// TestLiveCapturesThroughServe: the live captures replayed by the
// stand-in gateway as the real one sent them — stream data as binary
// messages, and for gw-restart the gateway killed and started again on
// the same port where the capture shows it — give expected.json's states
// and gaps: one gap while running, between the ids it names (the window
// starts at the last envelope stored before the restart, and the first
// envelope stored after the gap is the one named after it), one more once
// the bridge is stopped; ids that were stream data are absent. From the
// gateway's own log (history mode) there is no gap.
func TestLiveCapturesThroughServe(t *testing.T) {
	e := loadLive(t)
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"gw-restart", "streams-invite"} {
		sc := e.Scenarios[name]
		lines := readLines(t, filepath.Join(liveDir, sc.File))
		mew := liveMEWSpace(t, name)
		t.Run("live/"+name, func(t *testing.T) {
			space := "live-" + name
			gw := mewgw.Start(nil)
			t.Cleanup(func() { gw.Close() })
			b, stop := startBridgeStop(t, bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "t", Space: space,
				Sink: bridge.HTTPSink{Client: cl.Client}, ProbeInterval: 20 * time.Millisecond})
			waitJoined(t, gw, b, mew, 1)
			send := func(all [][]byte) {
				var ls [][]byte
				for _, l := range all {
					// The capture's observer saw the live bridge join and
					// leave; the bridge itself is not sent its own presence.
					if !bytes.Contains(l, []byte(`"participant":{"id":"`+bridgeName+`"`)) {
						ls = append(ls, l)
					}
				}
				before := b.Health().Frames
				for _, l := range ls {
					if l[0] == '#' {
						gw.BroadcastBinary(mew, l)
					} else {
						gw.Broadcast(mew, l)
					}
				}
				waitFrames(t, b, before+len(ls))
			}
			welcomes := 0
			start := 1 // the observer's welcome is not replayed
			for i := 1; i < len(lines); i++ {
				if !bytes.Contains(lines[i], []byte(`"kind":"system/welcome"`)) {
					continue
				}
				// The gateway restarted here: kill it, come back on the
				// same port.
				welcomes++
				send(lines[start:i])
				addr := gw.Addr()
				gw.Close()
				waitFor(t, "the bridge to notice", func() (bool, string) {
					h := b.Health()
					return h.State != bridge.StateJoined, h.State
				})
				var err error
				if gw, err = mewgw.StartOn(addr, nil); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(gw.Close)
				waitJoined(t, gw, b, mew, 1)
				waitFor(t, "the gap recorded", func() (bool, string) {
					h := b.Health()
					return h.Gaps == welcomes && h.Backlog == 0, h.State
				})
				start = i + 1
			}
			send(lines[start:])
			waitFor(t, "everything stored", func() (bool, string) { h := b.Health(); return h.Backlog == 0, h.State })
			gaps := gapsOf(t, cl, space)
			if len(gaps) != sc.Gaps.LiveRunning {
				t.Fatalf("gaps %+v, want %d while running", gaps, sc.Gaps.LiveRunning)
			}
			seqOf := func(id string) uint64 {
				t.Helper()
				for pid, p := range e.Proposals {
					if p.Scenario != name {
						continue
					}
					h, _, err := cl.History(ctx, pid, apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
					if err != nil {
						t.Fatal(err)
					}
					for _, ev := range h.Events {
						if ev.ID == id {
							return ev.Seq
						}
					}
				}
				t.Fatalf("%s is not in the ledger", id)
				return 0
			}
			for i, pair := range sc.Gaps.Between {
				g := gaps[i]
				if g.LastEnvelope != pair[0] || g.LastSeq != seqOf(pair[0]) {
					t.Errorf("gap %+v: want its window to start at %s", g, pair[0])
				}
				if after := seqOf(pair[1]); after < g.Seq {
					t.Errorf("%s at seq %d, before the gap at %d", pair[1], after, g.Seq)
				}
			}
			for _, id := range sc.Gaps.AbsentIDs {
				if _, _, err := cl.Get(ctx, id, apitest.ReadOptions{Space: space}); err == nil {
					t.Errorf("%s (stream data) is in the ledger", id)
				}
			}
			st, _, err := cl.Stats(ctx, apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
			if err != nil {
				t.Fatal(err)
			}
			for typ, n := range sc.EventCounts {
				if typ == "note" {
					continue // the one note is the chat threaded under a plain chat: skipped
				}
				if st.EventsByType[typ] != n {
					t.Errorf("%d %s events, want %d", st.EventsByType[typ], typ, n)
				}
			}
			checkLiveProposals(t, cl, e, name, space)
			stop()
			if gaps := gapsOf(t, cl, space); len(gaps) != sc.Gaps.LiveAfterStop {
				t.Errorf("after stop: gaps %+v, want %d", gaps, sc.Gaps.LiveAfterStop)
			}
		})
		t.Run("history/"+name, func(t *testing.T) {
			space := "live-history-" + name
			b := startBridge(t, bridge.Options{HistoryFile: filepath.Join(liveDir, "gateway-logs", sc.File), MEWSpace: mew, Space: space,
				Sink: bridge.AppenderSink{Appender: a.Appender()}, PollInterval: time.Millisecond})
			var lastLife string
			orphan := map[int]bool{}
			for _, o := range sc.Orphans {
				orphan[o.Line] = true
			}
			for _, l := range sc.Lifecycle {
				if !orphan[l.Line] {
					lastLife = l.ID
				}
			}
			waitFor(t, "the history file read", func() (bool, string) {
				h := b.Health()
				return h.Backlog == 0 && h.LastStored == lastLife, h.LastStored
			})
			if gaps := gapsOf(t, cl, space); len(gaps) != sc.Gaps.History {
				t.Errorf("gaps %+v, want %d", gaps, sc.Gaps.History)
			}
			checkLiveProposals(t, cl, e, name, space)
		})
	}
}

// checkLiveProposals compares a scenario's proposals with expected.json.
func checkLiveProposals(t *testing.T, cl *apitest.Client, e liveExpected, name, space string) {
	t.Helper()
	ro := apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)}
	for id, want := range e.Proposals {
		if want.Scenario != name {
			continue
		}
		p, _, err := cl.Get(context.Background(), id, ro)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		checkProposal(t, cl, ro, id, p, want)
	}
}

// liveMEWSpace is the MEW space id of a live capture (its gateway log's
// space_id).
func liveMEWSpace(t *testing.T, name string) string {
	t.Helper()
	for _, l := range readLines(t, filepath.Join(liveDir, "gateway-logs", name+".jsonl")) {
		var r struct {
			SpaceID string `json:"space_id"`
		}
		if json.Unmarshal(l, &r) == nil && r.SpaceID != "" {
			return r.SpaceID
		}
	}
	t.Fatalf("no space_id in the gateway log of %s", name)
	return ""
}
