package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/crashrig"
)

const debugRecorders = false

// recorderScenarios are the captures a paced run replays, round after
// round (their proposals: 1+1+1+1+4+3 a round).
var recorderScenarios = []string{"a-fulfil", "b-withdraw", "c-reject", "g-double", "i-batch", "i-http"}

// pacedFrame is one frame of the paced run: its bytes, its id and, for a
// lifecycle envelope (one the ledger stores), its id again.
type pacedFrame struct {
	frame     []byte
	id        string
	lifecycle string
}

// pacedRounds returns the frames of rounds rounds of the captures (each
// capture but its observer's welcome), every id and every correlation_id
// naming an id of the same capture suffixed with the round and the
// capture, so that each round is new traffic of the same shape, and the
// number of proposals. A frame is a lifecycle envelope when expected.json
// says so and the bridge would not skip it (a response to a plain
// request).
func pacedRounds(t *testing.T, rounds int) ([]pacedFrame, int) {
	t.Helper()
	e := loadExpected(t)
	type capture struct {
		lines     [][]byte
		ids       map[string]bool
		lifecycle map[int]bool
		index     int
	}
	var caps []capture
	for _, name := range recorderScenarios {
		sc, ok := e.Scenarios[name]
		if !ok {
			t.Fatalf("expected.json has no scenario %s", name)
		}
		c := capture{lines: readLines(t, filepath.Join(capturesDir, sc.File)), ids: map[string]bool{}, lifecycle: map[int]bool{}, index: len(caps)}
		for _, l := range sc.Lifecycle {
			c.lifecycle[l.Line] = true
		}
		for _, l := range sc.Orphans {
			delete(c.lifecycle, l.Line) // a response to a plain request: skipped
		}
		for _, l := range c.lines {
			var env struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(l, &env) == nil && env.ID != "" {
				c.ids[env.ID] = true
			}
		}
		caps = append(caps, c)
	}
	var out []pacedFrame
	proposals := 0
	for r := range rounds {
		for _, c := range caps {
			// Captures reuse ids of each other (coder-3, fs-agent-1).
			suffix := fmt.Sprintf("-r%ds%d", r, c.index)
			for i, l := range c.lines[1:] {
				line := i + 2
				var env map[string]any
				dec := json.NewDecoder(bytes.NewReader(l))
				dec.UseNumber()
				if err := dec.Decode(&env); err != nil {
					t.Fatal(err)
				}
				id, _ := env["id"].(string)
				if id != "" {
					id += suffix
					env["id"] = id
				}
				switch cid := env["correlation_id"].(type) {
				case string:
					if c.ids[cid] {
						env["correlation_id"] = cid + suffix
					}
				case []any:
					for j, x := range cid {
						if s, ok := x.(string); ok && c.ids[s] {
							cid[j] = s + suffix
						}
					}
				}
				b, err := json.Marshal(env)
				if err != nil {
					t.Fatal(err)
				}
				f := pacedFrame{frame: b, id: id}
				if c.lifecycle[line] {
					f.lifecycle = id
					if env["kind"] == "mcp/proposal" {
						proposals++
					}
				}
				out = append(out, f)
			}
		}
	}
	return out, proposals
}

// TestSeveralRecordersNoHoles (issue 38, contract §14 "Several
// recorders"): real processes — `ledger serve` (its NATS and Pebble),
// two `ledger bridge mew` processes joined to the stand-in gateway and a
// third following the gateway's envelope-history.jsonl — record a paced
// run of the MEW v0.11 captures (1,500 proposals and more). One bridge is
// SIGKILLed and started again, then the other, then both at once, then
// the follower is stopped for a while: after each, every lifecycle
// envelope the gateway delivered is stored exactly once, /v1/holes is
// empty and every closed gap is covered by the others. Then all three are
// down together: exactly one hole, whose window (between the envelopes on
// its two sides, in the gateway's order) holds every missing envelope and
// nothing stored; `ledger rebuild` gives the same holes; and `ledger
// bridge mew --history FILE --once` over the gateway's full log stores
// exactly the missing envelopes, after which there is no hole and the
// gaps that made it are covered, naming the file's recorder.
func TestSeveralRecordersNoHoles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the ledger binary and runs a paced scenario")
	}
	const (
		rounds = 137 // × 11 proposals
		u      = 4   // rounds: the phases below take 26u, the rest ends the run
		mew    = "recorders"
		space  = "recorders"
		nameA  = "recorder-a"
		nameB  = "recorder-b"
		nameH  = "recorder-log"
		nameF  = "gateway-log-copy"
	)
	frames, proposals := pacedRounds(t, rounds)
	if proposals < 1500 {
		t.Fatalf("%d proposals in %d rounds, want at least 1,500", proposals, rounds)
	}
	perRound := len(frames) / rounds

	dir := t.TempDir()
	bin := crashrig.Build(t, dir, false)
	srv := crashrig.StartServe(t, bin, filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0")
	cl, err := client.New(srv.API(), client.WithDefaultSpace(space))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("recorder-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := mewgw.StartOn("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	history := filepath.Join(dir, "envelope-history.jsonl")
	if err := gw.RecordHistory(history); err != nil {
		t.Fatal(err)
	}
	// The space's agents stay joined throughout: the gateway always
	// delivers (and logs) what it relays, whoever records it.
	agent, err := mewgw.Join(ctx, gw.URL(), mew, "coder", "agent-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)

	live := func(name string) []string {
		return []string{"--gateway", gw.URL(), "--mew-space", mew, "--participant", name, "--token-file", tokenFile,
			"--space", space, "--api", srv.API(), "--probe-interval", "50ms", "--backoff-max", "1s",
			// The participant list notices an eviction; no echo frames, so
			// that each recorder's last envelope is the run's last.
			"--echo-after", "0"}
	}
	follower := func(name string, once bool) []string {
		// --api: a follower learns from the ledger how its last session ended.
		args := []string{"--history", history, "--mew-space", mew, "--participant", name, "--space", space, "--nats-url", srv.Addr.NATS, "--api", srv.API()}
		if once {
			args = append(args, "--once")
		}
		return args
	}
	wait := func(what string, cond func() (bool, string)) {
		t.Helper()
		for {
			ok, state := cond()
			if ok {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %s\nserve:\n%s", what, state, srv.Logs.Tail(2048))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitJoined := func(name string, p *proc) {
		t.Helper()
		wait(name+" joined", func() (bool, string) {
			code, h := p.health()
			return code == http.StatusOK && (h.State == bridge.StateJoined || h.State == bridge.StateFollowing), fmt.Sprintf("%d %+v\n%s", code, h, p.logs.Tail(2048))
		})
	}

	// The paced run: frames broadcast in order, a millisecond apart.
	sent := 0
	var lastID string
	send := func(n int) {
		t.Helper()
		for range n * perRound {
			if sent == len(frames) {
				t.Fatal("the run has no frames left")
			}
			f := frames[sent]
			gw.Broadcast(mew, f.frame)
			if f.id != "" {
				lastID = f.id
			}
			sent++
			time.Sleep(time.Millisecond)
		}
	}
	running := map[string]*proc{}
	start := func(name string, args []string) {
		t.Helper()
		p := startBridgeProc(t, bin, args...)
		running[name] = p
		waitJoined(name, p)
	}
	kill := func(name string) {
		running[name].kill()
		delete(running, name)
	}
	stop := func(name string) {
		t.Helper()
		running[name].stop(t)
		delete(running, name)
	}
	// caughtUp waits until every running recorder has received the last
	// envelope sent and been answered for everything it handed the ledger.
	caughtUp := func() uint64 {
		t.Helper()
		for name, p := range running {
			wait(name+" caught up", func() (bool, string) {
				_, h := p.health()
				return h.LastEnvelope == lastID && h.Backlog == 0, fmt.Sprintf("%+v, want %s\n%s", h, lastID, p.logs.Tail(2048))
			})
		}
		st, err := cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.StreamSeq
	}
	// stored lists the space's events: the lifecycle envelopes by id
	// (each with its sequences) and the gap events.
	type storedLog struct {
		seqs   map[string][]uint64
		events int
		gaps   int
	}
	stored := func(minSeq uint64) storedLog {
		t.Helper()
		if _, err := cl.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Stats(ctx, client.WithMinSeq(minSeq)); err != nil {
			t.Fatal(err)
		}
		s := storedLog{seqs: map[string][]uint64{}}
		for ev, err := range cl.Events(ctx, client.EventFilter{Limit: 1000}) {
			if err != nil {
				t.Fatal(err)
			}
			s.events++
			if ev.Type == "gap" {
				s.gaps++
				continue
			}
			s.seqs[ev.ID] = append(s.seqs[ev.ID], ev.Seq)
		}
		return s
	}
	// checkOnce: every lifecycle envelope sent so far but those of skip
	// is stored exactly once, those of skip not at all, and nothing is
	// stored twice. It returns the ids missing.
	checkOnce := func(what string, s storedLog, skip map[string]bool) []string {
		t.Helper()
		var missing []string
		for _, f := range frames[:sent] {
			if f.lifecycle == "" {
				continue
			}
			n := len(s.seqs[f.lifecycle])
			switch {
			case skip[f.lifecycle] && n == 0:
				missing = append(missing, f.lifecycle)
			case skip[f.lifecycle]:
				t.Errorf("%s: %s was sent while no recorder was up, yet stored at %v", what, f.lifecycle, s.seqs[f.lifecycle])
			case n != 1:
				t.Errorf("%s: %s stored %d times, want once", what, f.lifecycle, n)
			}
		}
		for id, seqs := range s.seqs {
			if len(seqs) > 1 {
				t.Errorf("%s: %s stored %d times (%v)", what, id, len(seqs), seqs)
			}
		}
		return missing
	}
	holes := func(minSeq uint64) *api.Holes {
		t.Helper()
		h, err := cl.Holes(ctx, "", client.WithMinSeq(minSeq))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	gaps := func(minSeq uint64) []api.Gap {
		t.Helper()
		var out []api.Gap
		for cursor := ""; ; {
			p, err := cl.Gaps(ctx, cursor, client.WithMinSeq(minSeq))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p.Gaps...)
			if p.NextCursor == "" {
				return out
			}
			cursor = p.NextCursor
		}
	}
	// noHoles: after a phase in which some recorder was always up.
	noHoles := func(what string) {
		t.Helper()
		seq := caughtUp()
		checkOnce(what, stored(seq), nil)
		if h := holes(seq); len(h.Holes) != 0 {
			t.Errorf("%s: holes %+v, want none (a recorder was up throughout)", what, h.Holes)
		}
	}
	// allCovered: every gap whose window is closed is covered by the
	// other recorders.
	allCovered := func(what string) {
		t.Helper()
		seq := caughtUp()
		for _, g := range gaps(seq) {
			if g.EndSeq > 0 && !g.Covered {
				t.Errorf("%s: gap %s of %s (%q, window %d..%d) not covered", what, g.ID, g.Bridge, g.Reason, g.LastSeq, g.EndSeq)
				if debugRecorders {
					b, _ := json.Marshal(holes(seq).Recorders)
					gs, _ := json.Marshal(gaps(seq))
					t.Logf("recorders %s\ngaps %s", b, gs)
				}
			}
		}
	}

	start(nameA, live(nameA))
	start(nameB, live(nameB))
	start(nameH, follower(nameH, false))
	send(3 * u)
	noHoles("all three recording")

	// 1. kill -9 one bridge; the other and the follower record meanwhile.
	kill(nameA)
	send(3 * u)
	start(nameA, live(nameA))
	send(2 * u)
	noHoles("after " + nameA + " was killed and came back")

	// 2. Then the other.
	kill(nameB)
	send(3 * u)
	start(nameB, live(nameB))
	send(2 * u)
	noHoles("after " + nameB + " was killed and came back")

	// 3. Both bridges at once: the gateway's log covers.
	kill(nameA)
	kill(nameB)
	send(3 * u)
	start(nameA, live(nameA))
	start(nameB, live(nameB))
	send(2 * u)
	noHoles("after both bridges were killed and came back")

	// 4. The follower stopped for a while. A follower's progress is on
	// the record only with what it stores and its gaps: once it has
	// stopped, the gaps of the bridges are covered, each by the others.
	caughtUp()
	stop(nameH)
	allCovered("after the follower stopped")
	send(3 * u)
	start(nameH, follower(nameH, false))
	send(2 * u)
	noHoles("after the follower was stopped and started again")

	// 5. All three down together: one hole.
	caughtUp()
	kill(nameA)
	kill(nameB)
	stop(nameH)
	from := sent
	send(3 * u)
	outage := map[string]bool{}
	for _, f := range frames[from:sent] {
		if f.lifecycle != "" {
			outage[f.lifecycle] = true
		}
	}
	start(nameA, live(nameA))
	start(nameB, live(nameB))
	send(rounds - sent/perRound)
	seq := caughtUp()
	before := stored(seq)
	missing := checkOnce("after all three were down", before, outage)
	if len(missing) != len(outage) || len(missing) == 0 {
		t.Fatalf("%d missing, want the %d lifecycle envelopes sent while no recorder was up", len(missing), len(outage))
	}
	hs := holes(seq)
	if len(hs.Holes) != 1 {
		if debugRecorders {
			b, _ := json.Marshal(hs.Recorders)
			gs, _ := json.Marshal(gaps(seq))
			t.Logf("outage #%d..#%d\nrecorders %s\ngaps %s", from, sent, b, gs)
		}
		t.Fatalf("holes %+v, want exactly one", hs.Holes)
	}
	hole := hs.Holes[0]
	if hole.Open || hole.After == nil || hole.Before == nil || hole.MEWSpace != mew {
		t.Fatalf("hole %+v: want a closed window of %s between two stored envelopes", hole, mew)
	}
	for _, r := range []string{nameA, nameB, nameH} {
		if !slices.Contains(hole.Recorders, r) {
			t.Errorf("hole's recorders %v lack %s", hole.Recorders, r)
		}
	}
	// The window in the gateway's order: after the envelope After, before
	// the envelope Before; every envelope in it is missing, and every
	// missing one is in it.
	pos := map[string]int{}
	for i, f := range frames[:sent] {
		if f.lifecycle != "" {
			pos[f.lifecycle] = i
		}
	}
	lo, okLo := pos[hole.After.ID]
	hi, okHi := pos[hole.Before.ID]
	if !okLo || !okHi || lo >= hi {
		t.Fatalf("hole edges %+v / %+v are not envelopes of the run in order", hole.After, hole.Before)
	}
	for _, f := range frames[lo+1 : hi] {
		if f.lifecycle != "" && !outage[f.lifecycle] {
			t.Errorf("%s lies in the hole's window (#%d..#%d) but was stored", f.lifecycle, lo, hi)
		}
	}
	for _, id := range missing {
		if p := pos[id]; p <= lo || p >= hi {
			t.Errorf("%s (#%d) is missing outside the hole's window (#%d..#%d)", id, p, lo, hi)
		}
	}
	if st, err := cl.Stats(ctx, client.WithMinSeq(seq)); err != nil {
		t.Fatal(err)
	} else if st.Holes != 1 {
		t.Errorf("stats: %d holes, want 1", st.Holes)
	}

	// `ledger rebuild` gives the same holes and the same gaps.
	gapsBefore := gaps(seq)
	if out, err := exec.CommandContext(ctx, bin, "rebuild", "--api", srv.API(), "--progress", "off", "--log-level", "warn").CombinedOutput(); err != nil {
		t.Fatalf("ledger rebuild: %v\n%s", err, out)
	}
	if again := holes(seq); !reflect.DeepEqual(again.Holes, hs.Holes) {
		t.Errorf("after rebuild the holes are %+v, were %+v", again.Holes, hs.Holes)
	}
	if again := gaps(seq); !reflect.DeepEqual(again, gapsBefore) {
		t.Errorf("after rebuild the gaps are\n%+v\nwere\n%+v", again, gapsBefore)
	}

	// Healing: the gateway's full log, read once, stores only what was
	// missing; the hole becomes covered gaps naming the file's recorder.
	heal := exec.CommandContext(ctx, bin, append([]string{"bridge", "mew", "--quiet", "--log-format", "json"}, follower(nameF, true)...)...)
	heal.Env = crashrig.CleanEnv()
	if out, err := heal.CombinedOutput(); err != nil {
		t.Fatalf("bridge --history --once: %v\n%s", err, out)
	}
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := stored(st.StreamSeq)
	checkOnce("after healing", after, nil)
	if grown := after.events - after.gaps - (before.events - before.gaps); grown != len(missing) {
		t.Errorf("healing stored %d envelopes, want the %d missing", grown, len(missing))
	}
	if h := holes(st.StreamSeq); len(h.Holes) != 0 {
		t.Errorf("after healing: holes %+v, want none", h.Holes)
	}
	healed := 0
	for _, g := range gaps(st.StreamSeq) {
		if !slices.Contains(hole.Gaps, g.ID) || g.EndSeq == 0 {
			// A follower stopped (or answered only duplicates since) has
			// its window open: covered only by the others' current runs.
			continue
		}
		healed++
		if !g.Covered || !slices.Contains(g.CoveredBy, nameF) {
			t.Errorf("gap %s of %s (%q) after healing: covered %v by %v, want covered by %s", g.ID, g.Bridge, g.Reason, g.Covered, g.CoveredBy, nameF)
		}
	}
	if healed < 2 {
		t.Errorf("%d of the hole's gaps %v closed and covered after healing, want the two bridges' at least", healed, hole.Gaps)
	}
	var recs []string
	for _, r := range holes(st.StreamSeq).Recorders {
		recs = append(recs, fmt.Sprintf("%s (%d duplicates)", r.Bridge, r.Duplicates))
	}
	t.Logf("%d frames, %d proposals; %d lifecycle envelopes lost while all were down, healed from the log; recorders %s",
		sent, proposals, len(missing), strings.Join(recs, ", "))
}
