package fold_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/foldscript"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// holeSim simulates a MEW space recorded by live bridges and --history
// followers into one ledger space, as the bridge does it: a live bridge
// receives what the gateway delivers while it is joined, appends it in
// receive order (the first recorder to append an envelope stores it,
// the others are answered duplicate), records a gap when it joins again
// after a disconnection or eviction, a crash gap when it starts after a
// crash, and a stop gap when it stops; a follower reads the gateway's
// whole log from the start at its own pace.
type holeSim struct {
	t       *testing.T
	rng     *rand.Rand
	script  *foldscript.Script
	emitted int            // envelopes the gateway delivered: ids e1..eN, in order
	pos     map[int]uint64 // gateway index → log position of the stored envelope
	gwOf    map[uint64]int // log position → gateway index (envelopes only)
	recs    []*simRec
	clock   time.Time
}

type simRec struct {
	name    string
	history bool
	running bool // the process runs (false: never started, crashed or stopped)
	crashed bool // down after a crash: its session's end is not on the record
	joined  bool // live: joined to the gateway (a running process may be disconnected)
	session int
	queue   []int // live: received, not yet appended, in order; gapMarker where it rejoined
	line    int   // follower: next gateway index to read (1-based)
	// since the session's last join
	prev     uint64 // last position seen since the last join (BridgeMark.Prev)
	lastSeen uint64 // last position seen in the session (a gap's start)
	// conns are, per connection (a join to the next gap) of a live
	// session, the first and last positions it stored: a stretch its
	// marks prove it recorded, which some run of the recorder must span.
	conns []simConn
	dups  int64
}

const gapMarker = -1

type simConn struct {
	session string
	lo, hi  uint64
	open    bool // the connection goes on
}

// stored notes a position r stored in its current connection.
func (r *simRec) stored(seq uint64) {
	if r.history {
		return
	}
	if n := len(r.conns); n > 0 && r.conns[n-1].open && r.conns[n-1].session == r.sess() {
		r.conns[n-1].hi = seq
		return
	}
	r.conns = append(r.conns, simConn{session: r.sess(), lo: seq, hi: seq, open: true})
}

// endConn ends r's current connection.
func (r *simRec) endConn() {
	if n := len(r.conns); n > 0 {
		r.conns[n-1].open = false
	}
}

func (r *simRec) sess() string { return fmt.Sprintf("%s-%d", r.name, r.session) }

func (s *holeSim) append(ev fold.Event) {
	s.t.Helper()
	s.script.Log = append(s.script.Log, ev)
	if _, err := s.script.Folder.Apply(s.script.State, ev); err != nil {
		s.t.Fatal(err)
	}
}

func (s *holeSim) next() (uint64, time.Time) {
	s.clock = s.clock.Add(time.Second)
	return uint64(len(s.script.Log) + 1), s.clock
}

// offer appends gateway envelope i from r: stored, or answered duplicate.
func (s *holeSim) offer(r *simRec, i int) {
	if p, ok := s.pos[i]; ok {
		r.dups++
		r.prev, r.lastSeen = p, p
		return
	}
	seq, at := s.next()
	raw := fmt.Sprintf(`{"protocol":"mew/v0.4","id":"e%d","from":"alice","kind":"mcp/proposal","payload":{"method":"m"}}`, i)
	mark := ledger.BridgeMark{Bridge: r.name, MEWSpace: "demo", Session: r.sess(), Prev: r.prev, Dups: r.dups, History: r.history}
	ev := fold.Event{Seq: seq, Time: at, Subject: foldscript.DefaultSubject("default", []byte(raw), at), Raw: []byte(raw), Bridge: mark.String()}
	foldscript.Seal(&ev)
	s.append(ev)
	s.pos[i], s.gwOf[seq] = seq, i
	r.prev, r.lastSeen = seq, seq
	r.stored(seq)
}

func (s *holeSim) gap(r *simRec, session string, last uint64, reconnected bool, reason string) {
	seq, at := s.next()
	g := ledger.Gap{Bridge: r.name, MEWSpace: "demo", LastSeq: last, DisconnectedAt: at, Session: session, Reason: reason}
	if reconnected {
		g.ReconnectedAt = at
	}
	raw, err := ledger.GapEnvelope(g)
	if err != nil {
		s.t.Fatal(err)
	}
	s.append(fold.Event{Seq: seq, Time: at, Subject: foldscript.DefaultSubject("default", raw, at), Raw: raw})
}

// flushOne appends r's next received envelope (or line), or writes the
// gap of its last rejoin.
func (s *holeSim) flushOne(r *simRec) {
	if r.history {
		if r.line <= s.emitted {
			s.offer(r, r.line)
			r.line++
		}
		return
	}
	if len(r.queue) == 0 {
		return
	}
	i := r.queue[0]
	r.queue = r.queue[1:]
	if i == gapMarker {
		s.gap(r, r.sess(), r.lastSeen, true, "read: EOF")
		r.prev = 0
		r.endConn()
		return
	}
	s.offer(r, i)
}

// settleOthers appends what the other running live bridges received:
// a recorder's backlog is appended sooner than another one restarts or
// rejoins (the ordering coverage by log positions relies on, see
// holes.go).
func (s *holeSim) settleOthers(r *simRec) {
	for _, q := range s.recs {
		if q != r && q.running && !q.history {
			for len(q.queue) > 0 {
				s.flushOne(q)
			}
		}
	}
}

// start runs a new process of r: a new session; after a crash, the
// ledger's record says whether the last session ended with its hole on
// the record, else the crash gap first (the bridge's learn and seed).
func (s *holeSim) start(r *simRec) {
	rec, _ := s.script.State.BridgeSession("default", fold.BridgeKey(r.name, "demo"))
	if rec != nil && rec.State == api.BridgeRecording {
		s.gap(r, rec.Session, rec.LastSeq, true, "session ended without recording its end")
	}
	r.endConn()
	r.session++
	r.running, r.crashed, r.joined = true, false, true
	r.prev, r.lastSeen, r.dups, r.line, r.queue = 0, 0, 0, 1, nil
	if rec != nil {
		r.lastSeen = rec.LastSeq
	}
}

// step does one random thing.
func (s *holeSim) step() {
	r := s.recs[s.rng.IntN(len(s.recs))]
	switch x := s.rng.IntN(100); {
	case x < 30: // the gateway delivers
		s.emitted++
		for _, q := range s.recs {
			if !q.history && q.running && q.joined {
				q.queue = append(q.queue, s.emitted)
			}
		}
	case x < 70: // r appends its next received envelope (a follower its next line)
		if r.running {
			s.flushOne(r)
		}
	case x < 77: // crash: what was received is lost, nothing recorded
		if r.running {
			r.running, r.crashed, r.joined, r.queue = false, true, false, nil
		}
	case x < 84: // disconnection or eviction (live): the process goes on
		if r.running && !r.history {
			r.joined = false
		}
	case x < 88: // clean stop: what was received is appended, then the stop gap
		if r.running {
			s.stop(r)
		}
	case x < 91: // reconnect, then crash: a live bridge rejoins, appends its
		// gap and some of what it received after, and dies
		if r.running && !r.history {
			s.settleOthers(r)
			if !r.joined {
				r.joined = true
				r.queue = append(r.queue, gapMarker)
			}
			s.emitted++
			for _, q := range s.recs {
				if !q.history && q.running && q.joined {
					q.queue = append(q.queue, s.emitted)
				}
			}
			for n := s.rng.IntN(len(r.queue) + 1); n > 0; n-- {
				s.flushOne(r)
			}
			r.running, r.crashed, r.joined, r.queue = false, true, false, nil
		}
	default: // (re)start, or rejoin
		switch {
		case !r.running:
			s.settleOthers(r)
			s.start(r)
		case !r.history && !r.joined:
			s.settleOthers(r)
			r.joined = true
			r.queue = append(r.queue, gapMarker)
		}
	}
}

func (s *holeSim) stop(r *simRec) {
	for len(r.queue) > 0 {
		s.flushOne(r)
	}
	if !r.history && !r.joined {
		// stopped while disconnected: the open gap
		s.gap(r, r.sess(), r.lastSeen, false, "read: EOF; then the bridge stopped")
	} else {
		s.gap(r, r.sess(), r.lastSeen, false, "bridge stopped")
	}
	r.running, r.joined = false, false
}

// settle ends a schedule: every live bridge runs and is joined, and has
// appended everything it received; a follower, when heal, has read the
// whole log, else it is stopped where it is.
func (s *holeSim) settle(heal bool) {
	for _, r := range s.recs {
		if r.history && !heal {
			if !r.running {
				s.start(r)
			}
			s.stop(r)
			continue
		}
		switch {
		case !r.running:
			s.start(r)
		case !r.history && !r.joined:
			r.joined = true
			r.queue = append(r.queue, gapMarker)
		}
	}
	for _, r := range s.recs {
		for r.running && (len(r.queue) > 0 || r.history && r.line <= s.emitted) {
			s.flushOne(r)
		}
	}
}

// cracks returns the set of cracks [lo, hi) clipped at limit.
func addCracks(set map[uint64]bool, lo, hi, limit uint64) {
	for c := lo; c < hi && c < limit; c++ {
		set[c] = true
	}
}

// TestHolesProperty: random schedules of recorder crashes, restarts,
// disconnections (evictions) and clean stops of two live bridges and a
// follower. Then: every envelope the gateway delivered that the ledger
// lacks lies inside a hole (between the envelopes on its two sides, in
// the gateway's order); the holes contain the intersection of the
// recorders' gaps (never smaller); a covered gap holds no lost envelope;
// and folding the log again gives the same records and holes.
func TestHolesProperty(t *testing.T) {
	seeds := 300
	if n, err := strconv.Atoi(os.Getenv("LEDGER_HOLE_SEEDS")); err == nil {
		seeds = n
	} else if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := &holeSim{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 38)), script: foldscript.New(),
				pos: map[int]uint64{}, gwOf: map[uint64]int{}, clock: foldscript.Base}
			s.recs = []*simRec{{name: "a"}, {name: "b"}, {name: "h", history: true}}
			for range 200 + s.rng.IntN(200) {
				s.step()
			}
			heal := seed%2 == 0
			s.settle(heal)
			checkHoles(t, s)
			if heal {
				// the follower read the whole log: nothing lost, no hole
				if lost := s.emitted - len(s.pos); lost != 0 {
					t.Fatalf("%d envelopes lost with a follower that read the whole log", lost)
				}
			}
		})
	}
}

func checkHoles(t *testing.T, s *holeSim) {
	t.Helper()
	st := s.script.State
	gaps := st.Gaps("default")
	recs, runs := st.BridgeSessions("default")
	var frs []fold.Recorder
	for _, r := range recs {
		frs = append(frs, fold.Recorder{Record: r, Runs: runs[fold.BridgeKey(r.Bridge, r.MEWSpace)]})
	}
	holes := fold.Cover(gaps, frs)
	gwAt := func(e *api.HoleEdge) (int, bool) {
		if e == nil {
			return 0, true
		}
		// the nearest envelope at or before the position (gap events have none)
		for p := e.Seq; p > 0; p-- {
			if i, ok := s.gwOf[p]; ok {
				return i, true
			}
		}
		return 0, true
	}
	// 1. every lost envelope lies in a hole: after the envelope on its
	// near side and before the one on its far side, in the gateway's order.
	for i := 1; i <= s.emitted; i++ {
		if _, ok := s.pos[i]; ok {
			continue
		}
		in := false
		for _, h := range holes {
			if lo, _ := gwAt(h.After); h.After != nil && lo >= i {
				continue
			}
			if hi, _ := gwAt(h.Before); h.Before != nil && hi <= i {
				continue
			}
			in = true
		}
		if !in {
			t.Fatalf("envelope e%d was lost but lies in no hole\nholes: %s\n%s", i, js(holes), s.script.State.Dump())
		}
	}
	// 2. holes ⊇ the intersection of the recorders' gaps (each minus what
	// the recorder itself recorded in another session; the current
	// session of one recording now counts to the end).
	limit := uint64(len(s.script.Log)) + 2
	var inter map[uint64]bool
	for _, r := range recs {
		set := map[uint64]bool{}
		for _, g := range gaps {
			if g.Bridge == r.Bridge {
				lo, hi := min(g.LastSeq, g.Seq), limit
				if g.StartSeq != nil {
					lo = min(lo, *g.StartSeq)
				}
				if g.EndSeq > lo {
					hi = g.EndSeq
				}
				addCracks(set, lo, hi, limit)
			}
		}
		// minus what the recorder's other sessions recorded (a follower
		// that reads the gateway's log again heals its own window)
		for _, x := range runs[fold.BridgeKey(r.Bridge, r.MEWSpace)] {
			for c := x.Lo; c < x.Hi; c++ {
				delete(set, c)
			}
		}
		if x := r.Run; x != nil {
			for c := x.Lo; c < limit; c++ {
				delete(set, c)
			}
		}
		if inter == nil {
			inter = set
			continue
		}
		for c := range inter {
			if !set[c] {
				delete(inter, c)
			}
		}
	}
	holeSet := map[uint64]bool{}
	for _, h := range holes {
		lo, hi := uint64(0), limit
		if h.After != nil {
			lo = h.After.Seq
		}
		if h.Before != nil {
			hi = h.Before.Seq
		}
		addCracks(holeSet, lo, hi, limit)
	}
	if len(recs) == len(s.recs) {
		for c := range inter {
			if !holeSet[c] {
				t.Fatalf("crack %d is in every recorder's gap but in no hole\nholes: %s\ngaps: %s", c, js(holes), js(gaps))
			}
		}
	}
	// 3. a covered gap's window holds no lost envelope.
	for _, g := range gaps {
		if !g.Covered {
			continue
		}
		lo, _ := gwAt(&api.HoleEdge{Seq: min(g.LastSeq, g.Seq)})
		hi, _ := gwAt(&api.HoleEdge{Seq: g.EndSeq})
		for i := lo + 1; i < hi; i++ {
			if _, ok := s.pos[i]; !ok {
				t.Fatalf("gap %s is covered by %v but envelope e%d in its window was lost", g.ID, g.CoveredBy, i)
			}
		}
	}
	// 4. no recorder loses a stretch it recorded: each connection of a
	// live session (join to gap, crash or stop) that stored at two
	// positions or more lies inside one of the recorder's runs.
	for _, r := range s.recs {
		var rec *api.BridgeSession
		for i := range recs {
			if recs[i].Bridge == r.name {
				rec = &recs[i]
			}
		}
		for _, c := range r.conns {
			if c.hi <= c.lo {
				continue
			}
			ok := false
			all := slices.Clone(runs[fold.BridgeKey(r.name, "demo")])
			if rec != nil && rec.Run != nil {
				all = append(all, *rec.Run)
			}
			for _, x := range all {
				if x.Session == c.session && x.Lo <= c.lo && x.Hi >= c.hi {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("recorder %s lost the stretch %d..%d its session %s stored in one connection\nruns: %s\n%s",
					r.name, c.lo, c.hi, c.session, js(all), s.script.State.Dump())
			}
		}
	}
	// 5. rebuild: the same records, the same holes.
	fresh := foldscript.New()
	for _, ev := range s.script.Log {
		if _, err := fresh.Folder.Apply(fresh.State, ev); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := st.Dump(), fresh.State.Dump(); a != b {
		t.Fatalf("rebuild differs")
	}
	recs2, runs2 := fresh.State.BridgeSessions("default")
	var frs2 []fold.Recorder
	for _, r := range recs2 {
		frs2 = append(frs2, fold.Recorder{Record: r, Runs: runs2[fold.BridgeKey(r.Bridge, r.MEWSpace)]})
	}
	if a, b := js(holes), js(fold.Cover(fresh.State.Gaps("default"), frs2)); a != b {
		t.Fatalf("rebuilt holes differ:\n%s\n%s", a, b)
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }
