package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// bridgeName is the bridge's participant id in the tests.
const bridgeName = "ledger-recorder"

// startBridge runs a bridge until the test ends (t.Cleanup stops it and
// waits for Run).
func startBridge(t *testing.T, o bridge.Options) *bridge.Bridge {
	b, _ := startBridgeStop(t, o)
	return b
}

// startBridgeStop is startBridge, with a stop function (safe twice) that
// cancels Run and waits for it.
func startBridgeStop(t *testing.T, o bridge.Options) (*bridge.Bridge, func()) {
	t.Helper()
	if o.Participant == "" {
		o.Participant = bridgeName
	}
	o.Logger = natstest.Logger(t)
	if o.BackoffMin == 0 {
		o.BackoffMin, o.BackoffMax = 10*time.Millisecond, 100*time.Millisecond
	}
	b, err := bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("bridge run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return b, stop
}

// waitFor polls cond until it holds (bounded: a test that never gets
// there fails with what it saw).
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, saw)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFrames waits until the bridge has handled n frames.
func waitFrames(t *testing.T, b *bridge.Bridge, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d frames", n), func() (bool, string) {
		h := b.Health()
		return h.Frames >= n, fmt.Sprintf("%+v", h)
	})
}

// waitJoined waits until the gateway has seen the bridge join n times
// and the bridge has handled its welcome.
func waitJoined(t *testing.T, gw *mewgw.Gateway, b *bridge.Bridge, mew string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := gw.WaitJoins(ctx, mew, bridgeName, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bridge joined", func() (bool, string) {
		h := b.Health()
		return h.State == bridge.StateJoined, h.State
	})
}

// caughtUp returns the stream's last sequence (to read with min_seq).
func caughtUp(t *testing.T, cl *apitest.Client) uint64 {
	t.Helper()
	st, err := cl.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.StreamSeq
}

// replay broadcasts a capture's frames but its first (the observer's own
// welcome; the bridge gets its own) and waits until the bridge handled
// them.
func replay(t *testing.T, gw *mewgw.Gateway, b *bridge.Bridge, space string, lines [][]byte) {
	t.Helper()
	before := b.Health().Frames
	for _, l := range lines[1:] {
		gw.Broadcast(space, l)
	}
	waitFrames(t, b, before+len(lines)-1)
}

// TestCapturesThroughServe: every real capture, replayed frame by frame by
// a stand-in gateway to a bridge appending through a real `ledger serve`
// (in-process: embedded NATS, Pebble, HTTP API), gives exactly
// expected.json's states, anomalies, fulfilments and rejections; live
// (WebSocket, HTTP API sink) and from the gateway's own history file
// (in-process appender, each envelope under its received sender).
func TestCapturesThroughServe(t *testing.T) {
	e := loadExpected(t)
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"live", "history"} {
		for _, name := range scenarioNames(e) {
			t.Run(mode+"/"+name, func(t *testing.T) {
				sc := e.Scenarios[name]
				space := mode + "-" + name
				mew := mewSpace(t, name)
				var b *bridge.Bridge
				if mode == "live" {
					gw := mewgw.Start(nil)
					t.Cleanup(gw.Close)
					b = startBridge(t, bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "t", Space: space,
						Sink: bridge.HTTPSink{Client: cl.Client}, ProbeInterval: -1})
					waitJoined(t, gw, b, mew, 1)
					replay(t, gw, b, mew, readLines(t, filepath.Join(capturesDir, sc.File)))
				} else {
					logFile := filepath.Join(capturesDir, "gateway-logs", sc.File)
					b = startBridge(t, bridge.Options{HistoryFile: logFile, MEWSpace: mew, Space: space,
						Sink: bridge.AppenderSink{Appender: a.Appender()}})
					// Every delivered envelope once: the lines of the capture
					// but the observer's welcome (others' welcomes are
					// delivered to them, and counted too).
					waitFor(t, "the history file read", func() (bool, string) {
						h := b.Health()
						return h.LastEnvelope == lastID(t, sc) && h.Frames > 0 && h.Backlog == 0, fmt.Sprintf("%+v", h)
					})
				}
				wantAppended := len(sc.Lifecycle)
				for _, o := range sc.Orphans {
					for _, l := range sc.Lifecycle {
						if l.Line == o.Line && l.Kind == "mcp/response" {
							wantAppended--
						}
					}
				}
				if h := b.Health(); h.Appended != wantAppended || h.Gaps != 0 {
					t.Errorf("health %+v: want %d appended, no gap", h, wantAppended)
				}
				checkProposals(t, cl, e, name, space)
			})
		}
	}
}

// lastID is the id of a capture's last line.
func lastID(t *testing.T, sc scenario) string {
	lines := readLines(t, filepath.Join(capturesDir, sc.File))
	var env struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(lines[len(lines)-1], &env)
	return env.ID
}

// checkProposals compares every proposal of a scenario with expected.json.
func checkProposals(t *testing.T, cl *apitest.Client, e expected, name, space string) {
	t.Helper()
	ro := apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)}
	ctx := context.Background()
	n := 0
	for id, want := range e.Proposals {
		if want.Scenario != name {
			continue
		}
		n++
		p, _, err := cl.Get(ctx, id, ro)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		checkProposal(t, cl, ro, id, p, want)
	}
	list, _, err := cl.List(ctx, apitest.ListFilter{Limit: 1000}, ro)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Proposals) != n {
		t.Errorf("%d proposals in space %s, expected.json has %d", len(list.Proposals), space, n)
	}
}

func checkProposal(t *testing.T, cl *apitest.Client, ro apitest.ReadOptions, id string, p *api.Proposal, want expectedProposal) {
	t.Helper()
	eq := func(field, got, want string) {
		if want != "" && got != want {
			t.Errorf("%s: %s %q, want %q", id, field, got, want)
		}
	}
	eq("state", string(p.State), want.State)
	eq("proposer", p.Proposer, want.Proposer)
	eq("method", p.Method, want.Method)
	eq("dialect", p.Dialect, want.Dialect)
	eq("decided_by", p.DecidedBy, want.DecidedBy)
	eq("decided_event", p.DecidedEvent, want.DecidedEvent)
	eq("reason", p.Reason, want.Reason)
	if want.To != nil && !slices.Equal(p.To, want.To) {
		t.Errorf("%s: to %v, want %v", id, p.To, want.To)
	}
	got := slices.Clone(p.Anomalies)
	slices.Sort(got)
	wantAn := slices.Clone(want.Anomalies)
	slices.Sort(wantAn)
	if want.Anomalies != nil && !slices.Equal(got, wantAn) {
		t.Errorf("%s: anomalies %v, want %v", id, p.Anomalies, want.Anomalies)
	}
	if want.FulfillmentsLen != nil && len(p.Fulfillments) != *want.FulfillmentsLen {
		t.Errorf("%s: %d fulfilments, want %d", id, len(p.Fulfillments), *want.FulfillmentsLen)
	}
	for i, wf := range want.Fulfillments {
		if i >= len(p.Fulfillments) {
			t.Errorf("%s: fulfilment %d missing", id, i)
			continue
		}
		f := p.Fulfillments[i]
		if f.Event != wf.Event || f.From != wf.From || f.Late != wf.Late || f.Outcome != wf.Outcome {
			t.Errorf("%s: fulfilment %d %+v, want %+v", id, i, f, wf)
		}
	}
	for i, wr := range want.Rejections {
		if i >= len(p.Rejections) {
			t.Errorf("%s: rejection %d missing", id, i)
			continue
		}
		r := p.Rejections[i]
		if r.Event != wr.Event || r.From != wr.From || r.Reason != wr.Reason || !strings.Contains(r.Explanation, wr.ExplanationContains) {
			t.Errorf("%s: rejection %d %+v, want %+v", id, i, r, wr)
		}
	}
	if w := want.WithdrawalExplanationContains; w != "" && (p.Withdrawal == nil || !strings.Contains(p.Withdrawal.Explanation, w)) {
		t.Errorf("%s: withdrawal %+v, want an explanation containing %q", id, p.Withdrawal, w)
	}
	if want.LifecycleEffects == nil && want.HistoryIncludes == nil {
		return
	}
	h, _, err := cl.History(context.Background(), id, ro)
	if err != nil {
		t.Fatal(err)
	}
	var effects []string
	ids := map[string]bool{}
	for _, ev := range h.Events {
		ids[ev.ID] = true
		switch ev.Type {
		case "proposal", "withdraw", "reject", "fulfil":
			effects = append(effects, string(ev.Effect))
		}
	}
	if want.LifecycleEffects != nil && !slices.Equal(effects, want.LifecycleEffects) {
		t.Errorf("%s: lifecycle effects %v, want %v", id, effects, want.LifecycleEffects)
	}
	for _, inc := range want.HistoryIncludes {
		if !ids[inc] {
			t.Errorf("%s: history lacks %s", id, inc)
		}
	}
}
