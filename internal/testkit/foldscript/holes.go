package foldscript

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
)

// parseMark reads a mark= directive's value, B/M/S[/p=N][/d=N][/h], into a
// HeaderBridge value.
func parseMark(t testing.TB, v string) string {
	t.Helper()
	parts := strings.Split(v, "/")
	if len(parts) < 3 {
		t.Fatalf("bad mark directive %q: want mark=BRIDGE/MEW_SPACE/SESSION[/p=N][/d=N]", v)
	}
	m := ledger.BridgeMark{Bridge: parts[0], MEWSpace: parts[1], Session: parts[2]}
	for _, p := range parts[3:] {
		if p == "h" {
			m.History = true
			continue
		}
		k, val, _ := strings.Cut(p, "=")
		n, err := strconv.ParseUint(val, 10, 63)
		if err != nil {
			t.Fatalf("bad mark directive %q: %q", v, p)
		}
		switch k {
		case "p":
			m.Prev = n
		case "d":
			m.Dups = int64(n)
		default:
			t.Fatalf("bad mark directive %q: %q", v, p)
		}
	}
	return m.String()
}

func recorders(recs []api.BridgeSession, runs map[string][]api.RecorderRun) []fold.Recorder {
	out := make([]fold.Recorder, 0, len(recs))
	for _, r := range recs {
		out = append(out, fold.Recorder{Record: r, Runs: runs[fold.BridgeKey(r.Bridge, r.MEWSpace)]})
	}
	return out
}

// Holes returns the holes of space as the MemState's records give them,
// their edges' ids and times taken from the script's log.
func (s *Script) Holes(space string) []api.Hole {
	recs, runs := s.State.BridgeSessions(space)
	holes := fold.Cover(s.State.Gaps(space), recorders(recs, runs))
	for _, h := range holes {
		for _, e := range []*api.HoleEdge{h.After, h.Before} {
			if e != nil && e.Seq >= 1 && int(e.Seq) <= len(s.Log) {
				ev := s.Log[e.Seq-1]
				at := ev.Time.UTC()
				e.At = &at
				if d, err := ledger.Decode(ev.Raw, ledger.DecodeOptions{Now: at}); err == nil {
					e.ID = d.Env.ID
				}
			}
		}
	}
	return holes
}

// FormatHoles prints holes one a line.
func FormatHoles(holes []api.Hole) string {
	var b strings.Builder
	for _, h := range holes {
		fmt.Fprintf(&b, "mew_space=%s after=%s before=%s recorders=%s gaps=%s\n", h.MEWSpace, edge(h.After), edge(h.Before),
			strings.Join(h.Recorders, ","), strings.Join(h.Gaps, ","))
	}
	if b.Len() == 0 {
		return "no holes\n"
	}
	return b.String()
}

func edge(e *api.HoleEdge) string {
	if e == nil {
		return "-"
	}
	if e.ID == "" {
		return strconv.FormatUint(e.Seq, 10)
	}
	return fmt.Sprintf("%d(%s)", e.Seq, e.ID)
}

func seqOrOpen(n uint64) string {
	if n == 0 {
		return "open"
	}
	return strconv.FormatUint(n, 10)
}

func (s *Script) formatRecorders(space string) string {
	recs, runs := s.State.BridgeSessions(space)
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s/%s session=%s state=%s envelopes=%d duplicates=%d gaps=%d", r.Bridge, r.MEWSpace, r.Session, r.State, r.Envelopes, r.Duplicates, r.Gaps)
		var rs []string
		for _, x := range runs[fold.BridgeKey(r.Bridge, r.MEWSpace)] {
			rs = append(rs, fmt.Sprintf("%s:%d..%d", x.Session, x.Lo, x.Hi))
		}
		if len(rs) > 0 {
			fmt.Fprintf(&b, " runs=%s", strings.Join(rs, ","))
		}
		if x := r.Run; x != nil {
			fmt.Fprintf(&b, " run=%s:%d..%d", x.Session, x.Lo, x.Hi)
		}
		if len(r.OpenGaps) > 0 {
			fmt.Fprintf(&b, " open_gaps=%v", r.OpenGaps)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "no recorders\n"
	}
	return b.String()
}
