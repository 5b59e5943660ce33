package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// gapsOf returns the gaps GET /v1/gaps lists for a space, once the
// projection has caught up with the stream.
func gapsOf(t *testing.T, cl *apitest.Client, space string) []api.Gap {
	t.Helper()
	g, err := cl.Gaps(context.Background(), 0, "", apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
	if err != nil {
		t.Fatal(err)
	}
	return g.Gaps
}

func statsGaps(t *testing.T, cl *apitest.Client, space string) int64 {
	t.Helper()
	st, _, err := cl.Stats(context.Background(), apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Gaps
}

// gapOf is the gap report a gap record was folded from.
func gapOf(g api.Gap) ledger.Gap {
	r := ledger.Gap{Bridge: g.Bridge, MEWSpace: g.MEWSpace, Gateway: g.Gateway, LastEnvelope: g.LastEnvelope, LastSeq: g.LastSeq,
		DisconnectedAt: g.DisconnectedAt, Reason: g.Reason, Session: g.Session, Dropped: g.Dropped}
	if g.ReconnectedAt != nil {
		r.ReconnectedAt = *g.ReconnectedAt
	}
	if g.NoticedAt != nil {
		r.NoticedAt = *g.NoticedAt
	}
	return r
}

func idOf(t *testing.T, line []byte) string {
	var env struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		t.Fatal(err)
	}
	return env.ID
}

// TestDropGivesGap: the gateway drops the bridge's connection and a frame
// goes by while it is away (the rejection of c-reject); the bridge
// reconnects, and the ledger lists one gap naming the last envelope seen
// and both times, counted in /v1/stats; the lost rejection is missing
// (the proposal stays pending), the frames after the reconnection are
// recorded. Stopping the bridge then records an open gap.
func TestDropGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	lines := readLines(t, filepath.Join(capturesDir, "c-reject.jsonl"))
	mew, space := mewSpace(t, "c-reject"), "drop"
	b, stop := startBridgeStop(t, bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "t", Space: space,
		Sink: bridge.HTTPSink{Client: cl.Client}, ProbeInterval: 5 * time.Millisecond})
	waitJoined(t, gw, b, mew, 1)
	replay(t, gw, b, mew, lines[:6]) // up to the proposal (line 6)
	gw.Pause()
	if !gw.Drop(mew, bridgeName) {
		t.Fatal("the bridge is not joined")
	}
	waitFor(t, "the bridge to notice", func() (bool, string) {
		h := b.Health()
		return h.State != bridge.StateJoined, h.State
	})
	gw.Broadcast(mew, lines[6]) // the rejection: lost
	gw.Resume()
	waitJoined(t, gw, b, mew, 2)
	before := b.Health().Frames
	for _, l := range lines[7:] {
		gw.Broadcast(mew, l)
	}
	waitFrames(t, b, before+len(lines)-7)
	waitFor(t, "the gap recorded", func() (bool, string) {
		h := b.Health()
		return h.Gaps == 1, h.State
	})

	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 {
		t.Fatalf("gaps %+v, want 1", gaps)
	}
	g := gaps[0]
	if g.Bridge != bridgeName || g.MEWSpace != mew || g.Gateway != gw.URL() || g.LastEnvelope != idOf(t, lines[5]) || g.LastSeq == 0 ||
		g.ReconnectedAt == nil || g.ReconnectedAt.Before(g.DisconnectedAt) || !strings.Contains(g.Reason, "connection") {
		t.Errorf("gap %+v", g)
	}
	if n := statsGaps(t, cl, space); n != 1 {
		t.Errorf("stats gaps %d, want 1", n)
	}
	p, _, err := cl.Get(context.Background(), idOf(t, lines[5]), apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.StatePending {
		t.Errorf("state %s: the lost rejection was recorded?", p.State)
	}

	last := b.Health()
	stop()
	gaps = gapsOf(t, cl, space)
	if len(gaps) != 2 || gaps[1].ReconnectedAt != nil || gaps[1].Reason != "bridge stopped" || gaps[1].LastEnvelope != last.LastStored || gaps[1].LastSeq != last.LastSeq {
		t.Errorf("after stop: gaps %+v, want a second, open one", gaps)
	}
}

// TestEvictionGivesGap: a participant joins under the bridge's name with
// another token, as anyone can on a real gateway (its socket replaces the
// bridge's, which stays open and silent); the bridge notices from the
// gateway's participant list, records a gap saying it was evicted, and
// rejoins; what the space carries next is recorded again.
func TestEvictionGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	gw := mewgw.Start(map[string][]map[string]any{"recorder-token": {}})
	t.Cleanup(gw.Close)
	lines := readLines(t, filepath.Join(capturesDir, "b-withdraw.jsonl"))
	mew, space := mewSpace(t, "b-withdraw"), "evict"
	b := startBridge(t, bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "recorder-token", Space: space,
		Sink: bridge.HTTPSink{Client: cl.Client}, ProbeInterval: 5 * time.Millisecond})
	waitJoined(t, gw, b, mew, 1)
	replay(t, gw, b, mew, lines[:5]) // up to the proposal
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	impostor, err := mewgw.Join(ctx, gw.URL(), mew, bridgeName, "someone-else")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(impostor.Close)
	// Joins: the bridge, the impostor, the bridge again.
	waitJoined(t, gw, b, mew, 3)
	waitFor(t, "the gap recorded", func() (bool, string) {
		h := b.Health()
		return h.Gaps == 1 && h.State == bridge.StateJoined, h.State
	})
	replay(t, gw, b, mew, lines[4:]) // lines[4] is skipped by replay: the rest after the proposal

	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 || !strings.Contains(gaps[0].Reason, "evicted") || gaps[0].LastEnvelope != idOf(t, lines[4]) || gaps[0].ReconnectedAt == nil {
		t.Fatalf("gaps %+v, want one eviction", gaps)
	}
	p, _, err := cl.Get(context.Background(), idOf(t, lines[4]), apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.StateWithdrawn {
		t.Errorf("state %s: the withdrawal after the rejoin was not recorded", p.State)
	}
}

// spoofLog returns a gateway log with the received record of envelope id
// given another participant: the socket that really sent it.
func spoofLog(t *testing.T, lines [][]byte, id, participant string) [][]byte {
	t.Helper()
	out := make([][]byte, len(lines))
	found := false
	for i, l := range lines {
		out[i] = l
		var r map[string]any
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		if r["event"] == "received" && r["id"] == id {
			r["participant"] = participant
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out[i], found = b, true
		}
	}
	if !found {
		t.Fatalf("no received record of %s", id)
	}
	return out
}

// TestHistorySpoofedSender: from a real gateway log in which mallory's
// socket sent the withdrawal that claims to be from coder (the gateway
// keeps a client's from), the bridge in history mode — following the file
// while it grows and is rotated, publishing through NATS under the
// received sender — gets the withdrawal folded invalid (spoofed_sender):
// the proposal stays pending. A record claiming the sender "ledger" is
// refused (reserved_sender).
func TestHistorySpoofedSender(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(a.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sink, err := bridge.NewNATSSink(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)

	const proposal, withdraw, chat = "a0e388ea-18a2-489a-a929-16940bfe6daf", "40da0ed0-97af-4470-83ba-02861fd3c671", "coder-3"
	logLines := readLines(t, filepath.Join(capturesDir, "gateway-logs", "b-withdraw.jsonl"))
	logLines = spoofLog(t, logLines, withdraw, "mallory")
	logLines = spoofLog(t, logLines, chat, "ledger")
	cut := 0
	for i, l := range logLines {
		if bytes.Contains(l, []byte(`"received"`)) && bytes.Contains(l, []byte(`"id":"`+withdraw)) {
			cut = i
			break
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "envelope-history.jsonl")
	write := func(name string, lines [][]byte) {
		t.Helper()
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if _, err := f.Write(append(l, '\n')); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(path, logLines[:cut])
	mew, space := mewSpace(t, "b-withdraw"), "history-spoof"
	b := startBridge(t, bridge.Options{HistoryFile: path, MEWSpace: mew, Space: space, Sink: sink, PollInterval: time.Millisecond})
	waitFor(t, "the proposal recorded", func() (bool, string) {
		h := b.Health()
		return h.Appended == 1, h.State
	})
	// Half a line, then rotation: the old file gets the rest of its line,
	// a new file the remainder.
	half := len(logLines[cut]) / 2
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(logLines[cut][:half]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(path+".1", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(logLines[cut][half:], '\n')); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	write(path, logLines[cut+1:])
	waitFor(t, "the whole log read", func() (bool, string) {
		h := b.Health()
		return h.LastEnvelope == idOf(t, readLines(t, filepath.Join(capturesDir, "b-withdraw.jsonl"))[9]), h.LastEnvelope
	})

	ro := apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)}
	p, _, err := cl.Get(context.Background(), proposal, ro)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != api.StatePending {
		t.Errorf("state %s, want pending: the spoofed withdrawal applied", p.State)
	}
	h, _, err := cl.History(context.Background(), proposal, ro)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ev := range h.Events {
		if ev.ID == withdraw {
			found = true
			if ev.Effect != api.EffectInvalid || !strings.Contains(ev.Code+ev.Reason, "spoofed_sender") {
				t.Errorf("withdrawal %+v, want invalid spoofed_sender", ev)
			}
		}
		if ev.ID == chat {
			t.Errorf("the chat sent as %q was recorded: %+v", "ledger", ev)
		}
	}
	if !found {
		t.Errorf("history %+v lacks the withdrawal", h.Events)
	}
	if hl := b.Health(); hl.Appended != 2 {
		t.Errorf("health %+v: want 2 appended (the proposal and the spoofed withdrawal), the chat refused", hl)
	}
}

// TestHistoryTruncationGivesGap: a history file truncated under the bridge
// (copytruncate rotation) is read again from its start, and the lines that
// may have been cut unread are reported as a gap.
func TestHistoryTruncationGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	logLines := readLines(t, filepath.Join(capturesDir, "gateway-logs", "c-reject.jsonl"))
	mew, space := mewSpace(t, "c-reject"), "history-truncate"
	path := filepath.Join(t.TempDir(), "envelope-history.jsonl")
	if err := os.WriteFile(path, append(bytes.Join(logLines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, bridge.Options{HistoryFile: path, MEWSpace: mew, Space: space, Sink: bridge.AppenderSink{Appender: a.Appender()}, PollInterval: time.Millisecond})
	waitFor(t, "the log read", func() (bool, string) {
		h := b.Health()
		return h.Appended == 3, h.State
	})
	// Truncated, then a shorter file: the first lines again (duplicates).
	if err := os.WriteFile(path, append(bytes.Join(logLines[:3], []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gap recorded", func() (bool, string) {
		h := b.Health()
		return h.Gaps == 1, h.State
	})
	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 || gaps[0].Reason != "history file truncated" || gaps[0].Gateway != path || gaps[0].Bridge != bridgeName {
		t.Errorf("gaps %+v", gaps)
	}
}

// TestEvictionNoticeGivesGap: a gateway that tells the replaced socket
// about the duplicate join (a presence join under the bridge's own name)
// evicts the bridge at once, with the probe off.
func TestEvictionNoticeGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	gw.NotifyReplaced(true)
	mew, space := "m", "evict-notice"
	b := startBridge(t, bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "t", Space: space,
		Sink: bridge.AppenderSink{Appender: a.Appender()}, ProbeInterval: -1})
	waitJoined(t, gw, b, mew, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	impostor, err := mewgw.Join(ctx, gw.URL(), mew, bridgeName, "t")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(impostor.Close)
	waitJoined(t, gw, b, mew, 3)
	waitFor(t, "the gap recorded", func() (bool, string) {
		h := b.Health()
		return h.Gaps == 1, h.State
	})
	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 || !strings.Contains(gaps[0].Reason, "evicted") || !strings.Contains(gaps[0].Reason, "announced") {
		t.Errorf("gaps %+v", gaps)
	}
}

// TestRestartKeepsEveryGap: a bridge stops cleanly, then runs twice more
// storing nothing new (a connection drop in the second run): every run's
// gaps start at the same last stored envelope, yet each is on the record
// with its own id (issue 38: gap ids were the bridge and the window's
// start, so a restart that stored nothing new folded its gaps
// id_conflict).
func TestRestartKeepsEveryGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	lines := readLines(t, filepath.Join(capturesDir, "c-reject.jsonl"))
	mew, space := mewSpace(t, "c-reject"), "restart"
	sink, err := bridge.NewHTTPSink(a.HTTPURL(), "")
	if err != nil {
		t.Fatal(err)
	}
	o := bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "t", Space: space, Sink: sink, ProbeInterval: 5 * time.Millisecond}

	b, stop := startBridgeStop(t, o)
	waitJoined(t, gw, b, mew, 1)
	replay(t, gw, b, mew, lines[:6])
	stop()
	want := 1

	b, stop = startBridgeStop(t, o) // stores nothing new, drops once
	waitJoined(t, gw, b, mew, 2)
	if !gw.Drop(mew, bridgeName) {
		t.Fatal("the bridge is not joined")
	}
	waitJoined(t, gw, b, mew, 3)
	waitFor(t, "the drop's gap recorded", func() (bool, string) {
		h := b.Health()
		return h.Gaps == 1, fmt.Sprintf("%+v", h)
	})
	stop()
	want += 2

	b, stop = startBridgeStop(t, o) // stores nothing new
	waitJoined(t, gw, b, mew, 4)
	stop()
	want++

	gaps := gapsOf(t, cl, space)
	if len(gaps) != want || statsGaps(t, cl, space) != int64(want) {
		t.Fatalf("%d gaps on the record, want %d: %+v", len(gaps), want, gaps)
	}
	ids := map[string]bool{}
	sessions := map[string]bool{}
	for _, g := range gaps {
		if g.LastEnvelope != idOf(t, lines[5]) || g.ID != ledger.GapID(gapOf(g)) || ids[g.ID] {
			t.Errorf("gap %+v", g)
		}
		ids[g.ID], sessions[g.Session] = true, true
	}
	if len(sessions) != 3 {
		t.Errorf("gaps of %d sessions, want 3: %+v", len(sessions), gaps)
	}
	ev, _, err := cl.Stats(context.Background(), apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
	if err != nil {
		t.Fatal(err)
	}
	if n := ev.Anomalies["id_conflict"] + ev.Effects["invalid"]; n != 0 {
		t.Errorf("stats %+v: gaps discarded", ev)
	}
}
