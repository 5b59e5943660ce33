package projections

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/internal/hostile"
	"github.com/mewledger/ledger/internal/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// TestRecentProposalsChangeNothing folds the same log into a store that
// reads recently committed proposals from memory and into one that reads
// everything from Pebble, committing at random boundaries, and requires
// byte-identical stores: the cache must hold exactly what Pebble holds.
func TestRecentProposalsChangeNothing(t *testing.T) {
	var raws [][]byte
	g := workload.New(workload.Options{Seed: 9, PadTo: 300, Disorder: 15, Duplicates: 5, Foreign: 10,
		Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 15, Response: 10, Chat: 10}})
	raws = append(raws, g.Batch(4000)...)
	// Kernel proposals and approvals (not cached) and every seed envelope.
	for _, dir := range []string{"../ledger/testdata/envelopes", "../ledger/testdata/kernel"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				raws = append(raws, b)
			}
		}
	}
	cases, err := hostile.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if len(c.Data) < 64<<10 {
			raws = append(raws, c.Data)
		}
	}
	raws = append(raws, g.Batch(2000)...)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := make([]Event, len(raws))
	for i, raw := range raws {
		subj := "ledger.default.x.proposal.y"
		if d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0}); err == nil && d.Type.Valid() {
			subj = subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		evs[i] = Event{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Subject: subj, Raw: raw}
	}
	fold := func(keep int) string {
		s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20, recentCap: keep})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rng := rand.New(rand.NewPCG(1, 1))
		f := NewFolder()
		b := s.NewBatch()
		for i, ev := range evs {
			if _, err := f.Apply(b, ev); err != nil {
				t.Fatal(err)
			}
			// Batches of 1 to ~400 events, as the projector's.
			if rng.IntN(1+i%400) == 0 || i == len(evs)-1 {
				if err := b.Commit(ev.Seq); err != nil {
					t.Fatal(err)
				}
				b = s.NewBatch()
			}
		}
		b.Discard()
		d, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	without := fold(-1)
	for _, keep := range []int{0, 37} {
		if with := fold(keep); with != without {
			t.Fatalf("store digest keeping %d recent proposals (0: the default) %s, keeping none %s", keep, with, without)
		}
	}
}
