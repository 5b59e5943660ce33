package bench

import (
	"bytes"
	"testing"

	"github.com/mewledger/ledger/projections/fold"
)

// TestCoverageEvents: the coverage row's log folds as the three
// recorders' log it stands for: nothing refused, every proposal applied,
// a crash gap per 2,000 envelopes, each covered by the other live bridge.
func TestCoverageEvents(t *testing.T) {
	evs, err := generate(0, 10_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var props []event
	for _, e := range evs {
		if containsProposal(e.raw) {
			props = append(props, e)
		}
	}
	log, err := coverageEvents(props)
	if err != nil {
		t.Fatal(err)
	}
	st, f := fold.NewMemState(), &fold.Folder{MarkKeys: coverageKeys}
	for _, ev := range log {
		if _, err := f.Apply(st, ev); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := st.Stats(space)
	if s.Effects["invalid"] != 0 || s.Proposals != int64(len(props)) || s.Gaps != int64((len(props)-1)/2000) || s.Gaps == 0 {
		t.Fatalf("stats: proposals %d of %d, gaps %d, effects %v", s.Proposals, len(props), s.Gaps, s.Effects)
	}
	recs, runs := st.BridgeSessions(space)
	var frs []fold.Recorder
	for _, r := range recs {
		frs = append(frs, fold.Recorder{Record: r, Runs: runs[fold.BridgeKey(r.Bridge, r.MEWSpace)]})
	}
	gaps := st.Gaps(space)
	if holes := fold.Cover(gaps, frs); len(holes) != 0 {
		t.Fatalf("holes: %+v", holes)
	}
	for _, g := range gaps {
		if !g.Covered {
			t.Fatalf("gap %s not covered", g.ID)
		}
	}
}

func containsProposal(raw []byte) bool {
	return len(raw) > 0 && bytes.Contains(raw, proposalKind)
}
