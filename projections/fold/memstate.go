package fold

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mewledger/ledger/api"
)

// MemState is an in-memory State: the fold's reference store, which the
// tests and the fold scripts fold into. It is not safe for concurrent use. Records it returns
// must not be mutated by callers (the fold clones before changing).
type MemState struct {
	proposals map[string]*api.Proposal
	refs      map[string]*EventRef
	orphans   map[string][]Orphan
	parked    map[string]*ParkedEvent
	filed     map[string]int
	history   map[string]map[uint64]api.HistoryEntry
	stats     map[string]*api.Stats
	gaps      map[string][]api.Gap // by space, in the order written (stream order)
	bridges   map[string]*api.BridgeSession
	runs      map[string][]api.RecorderRun
	versions  map[string]uint64
}

// NewMemState returns an empty MemState.
func NewMemState() *MemState {
	return &MemState{
		proposals: map[string]*api.Proposal{},
		refs:      map[string]*EventRef{},
		orphans:   map[string][]Orphan{},
		parked:    map[string]*ParkedEvent{},
		filed:     map[string]int{},
		history:   map[string]map[uint64]api.HistoryEntry{},
		stats:     map[string]*api.Stats{},
		gaps:      map[string][]api.Gap{},
		bridges:   map[string]*api.BridgeSession{},
		runs:      map[string][]api.RecorderRun{},
		versions:  map[string]uint64{},
	}
}

func mk(space, id string) string { return space + "\x00" + id }

// Proposal implements State.
func (m *MemState) Proposal(space, id string) (*api.Proposal, error) {
	return m.proposals[mk(space, id)], nil
}

// PutProposal implements State.
func (m *MemState) PutProposal(p *api.Proposal) error {
	m.proposals[mk(p.Space, p.ID)] = p
	return nil
}

// EventRef implements State.
func (m *MemState) EventRef(space, id string) (*EventRef, error) { return m.refs[mk(space, id)], nil }

// PutEventRef implements State.
func (m *MemState) PutEventRef(space, id string, r *EventRef) error {
	m.refs[mk(space, id)] = r
	return nil
}

// Orphans implements State.
func (m *MemState) Orphans(space, target string) ([]Orphan, error) {
	return m.orphans[mk(space, target)], nil
}

// PutOrphans implements State.
func (m *MemState) PutOrphans(space, target string, o []Orphan) error {
	if len(o) == 0 {
		delete(m.orphans, mk(space, target))
		return nil
	}
	m.orphans[mk(space, target)] = o
	return nil
}

func parkKey(space string, seq uint64) string { return fmt.Sprintf("%s\x00%020d", space, seq) }

// Parked implements State.
func (m *MemState) Parked(space string, seq uint64) (*ParkedEvent, error) {
	return m.parked[parkKey(space, seq)], nil
}

// PutParked implements State.
func (m *MemState) PutParked(space string, seq uint64, p *ParkedEvent) error {
	if p == nil {
		delete(m.parked, parkKey(space, seq))
		return nil
	}
	m.parked[parkKey(space, seq)] = p
	return nil
}

// Filed implements State.
func (m *MemState) Filed(space, key string) (int, error) { return m.filed[mk(space, key)], nil }

// PutFiled implements State.
func (m *MemState) PutFiled(space, key string, n int) error {
	if n <= 0 {
		delete(m.filed, mk(space, key))
		return nil
	}
	m.filed[mk(space, key)] = n
	return nil
}

// PutHistory implements State.
func (m *MemState) PutHistory(space, key string, h *api.HistoryEntry) error {
	k := mk(space, key)
	if m.history[k] == nil {
		m.history[k] = map[uint64]api.HistoryEntry{}
	}
	m.history[k][h.Seq] = *h
	return nil
}

// DeleteHistory implements State.
func (m *MemState) DeleteHistory(space, key string, seq uint64) error {
	k := mk(space, key)
	delete(m.history[k], seq)
	if len(m.history[k]) == 0 {
		delete(m.history, k)
	}
	return nil
}

// Stats implements State.
func (m *MemState) Stats(space string) (*api.Stats, error) { return m.stats[space], nil }

// PutStats implements State.
func (m *MemState) PutStats(space string, s *api.Stats) error {
	m.stats[space] = s
	return nil
}

// PutGap implements State.
func (m *MemState) PutGap(space string, g *api.Gap) error {
	for i := range m.gaps[space] {
		if m.gaps[space][i].Seq == g.Seq {
			m.gaps[space][i] = *g
			return nil
		}
	}
	m.gaps[space] = append(m.gaps[space], *g)
	return nil
}

// Gap implements State.
func (m *MemState) Gap(space string, seq uint64) (*api.Gap, error) {
	for i := range m.gaps[space] {
		if m.gaps[space][i].Seq == seq {
			g := m.gaps[space][i]
			return &g, nil
		}
	}
	return nil, nil
}

// RecorderRuns implements State.
func (m *MemState) RecorderRuns(space, key string) ([]api.RecorderRun, error) {
	return m.runs[mk(space, key)], nil
}

// PutRecorderRuns implements State.
func (m *MemState) PutRecorderRuns(space, key string, runs []api.RecorderRun) error {
	if len(runs) == 0 {
		delete(m.runs, mk(space, key))
		return nil
	}
	m.runs[mk(space, key)] = slices.Clone(runs)
	return nil
}

// BridgeSessions returns what the log says of every bridge of space,
// ordered by key (bridge, MEW space), with their closed runs.
func (m *MemState) BridgeSessions(space string) ([]api.BridgeSession, map[string][]api.RecorderRun) {
	var keys []string
	for k := range m.bridges {
		if rest, ok := strings.CutPrefix(k, space+"\x00"); ok {
			keys = append(keys, rest)
		}
	}
	slices.Sort(keys)
	out := make([]api.BridgeSession, 0, len(keys))
	runs := map[string][]api.RecorderRun{}
	for _, k := range keys {
		out = append(out, *m.bridges[mk(space, k)])
		if r := m.runs[mk(space, k)]; len(r) > 0 {
			runs[k] = r
		}
	}
	return out, runs
}

// BridgeSession implements State.
func (m *MemState) BridgeSession(space, key string) (*api.BridgeSession, error) {
	return m.bridges[mk(space, key)], nil
}

// PutBridgeSession implements State.
func (m *MemState) PutBridgeSession(space, key string, s *api.BridgeSession) error {
	m.bridges[mk(space, key)] = s
	return nil
}

// Version implements State.
func (m *MemState) Version(space, id, digest string) (uint64, error) {
	return m.versions[mk(space, id+"\x00"+digest)], nil
}

// PutVersion implements State.
func (m *MemState) PutVersion(space, id, digest string, seq uint64) error {
	m.versions[mk(space, id+"\x00"+digest)] = seq
	return nil
}

// Gaps returns the recording gaps of a space, oldest first.
func (m *MemState) Gaps(space string) []api.Gap {
	out := slices.Clone(m.gaps[space])
	slices.SortFunc(out, func(a, b api.Gap) int { return cmpUint(a.Seq, b.Seq) })
	return out
}

// History returns the entries filed under key, in sequence order.
func (m *MemState) History(space, key string) []api.HistoryEntry {
	hs := m.history[mk(space, key)]
	out := make([]api.HistoryEntry, 0, len(hs))
	for _, h := range hs {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b api.HistoryEntry) int { return cmpUint(a.Seq, b.Seq) })
	return out
}

// Proposals returns every proposal of a space ordered by CreatedSeq.
func (m *MemState) Proposals(space string) []*api.Proposal {
	var out []*api.Proposal
	for k, p := range m.proposals {
		if strings.HasPrefix(k, space+"\x00") {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *api.Proposal) int { return cmpUint(a.CreatedSeq, b.CreatedSeq) })
	return out
}

// HistoryKeys returns every key that has history in a space, sorted.
func (m *MemState) HistoryKeys(space string) []string {
	var out []string
	for k := range m.history {
		if rest, ok := strings.CutPrefix(k, space+"\x00"); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out
}

// WaitingOrphans returns the number of events waiting in a space.
func (m *MemState) WaitingOrphans(space string) int {
	n := 0
	for k, o := range m.orphans {
		if strings.HasPrefix(k, space+"\x00") {
			n += len(o)
		}
	}
	return n
}

// Dump renders every record of m, one a line, in a fixed order (by record
// kind, then key): two MemStates that dump equal hold the same records.
// It is for tests comparing folds.
func (m *MemState) Dump() string {
	var b strings.Builder
	enc := func(v any) string { j, _ := json.Marshal(v); return string(j) }
	for _, k := range slices.Sorted(maps.Keys(m.proposals)) {
		fmt.Fprintf(&b, "P %q %s\n", k, enc(m.proposals[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.refs)) {
		fmt.Fprintf(&b, "E %q %s\n", k, enc(m.refs[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.orphans)) {
		fmt.Fprintf(&b, "O %q %s\n", k, enc(m.orphans[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.history)) {
		space, key, _ := strings.Cut(k, "\x00")
		fmt.Fprintf(&b, "H %q %s\n", k, enc(m.History(space, key)))
	}
	for _, k := range slices.Sorted(maps.Keys(m.parked)) {
		fmt.Fprintf(&b, "X %q %s\n", k, enc(m.parked[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.filed)) {
		fmt.Fprintf(&b, "F %q %d\n", k, m.filed[k])
	}
	for _, k := range slices.Sorted(maps.Keys(m.gaps)) {
		fmt.Fprintf(&b, "G %q %s\n", k, enc(m.Gaps(k)))
	}
	for _, k := range slices.Sorted(maps.Keys(m.bridges)) {
		fmt.Fprintf(&b, "B %q %s\n", k, enc(m.bridges[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.runs)) {
		fmt.Fprintf(&b, "R %q %s\n", k, enc(m.runs[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.stats)) {
		fmt.Fprintf(&b, "S %q %s\n", k, enc(m.stats[k]))
	}
	return b.String()
}

// Spaces returns, sorted, every space m holds a proposal, event ref,
// waiting list, history entry, statistics or gap of.
func (m *MemState) Spaces() []string {
	set := map[string]bool{}
	for _, keys := range [][]string{slices.Collect(maps.Keys(m.proposals)), slices.Collect(maps.Keys(m.refs)),
		slices.Collect(maps.Keys(m.orphans)), slices.Collect(maps.Keys(m.history))} {
		for _, k := range keys {
			sp, _, _ := strings.Cut(k, "\x00")
			set[sp] = true
		}
	}
	for sp := range m.stats {
		set[sp] = true
	}
	for sp := range m.gaps {
		set[sp] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// EventRefs returns the event-id index entries of a space, by id.
func (m *MemState) EventRefs(space string) []*EventRef {
	var ids []string
	for k := range m.refs {
		if id, ok := strings.CutPrefix(k, space+"\x00"); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]*EventRef, 0, len(ids))
	for _, id := range ids {
		out = append(out, m.refs[mk(space, id)])
	}
	return out
}
