package projections

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// TestRecentProposalsChangeNothing folds the same log into a store that
// reads recently committed proposals from memory and into one that reads
// everything from Pebble, committing at random boundaries, and requires
// byte-identical stores: the cache must hold exactly what Pebble holds. The
// same goes for the written filter of an empty store (records it rules out
// are read as absent without Pebble): with it, with one so small that it
// fills up and is dropped half-way, and without it, through Prepare's
// prefetch and through the read methods alone.
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
	cases, err := badinput.LoadDefault()
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
	evs := make([]fold.Event, len(raws))
	for i, raw := range raws {
		subj := "ledger.default.x.proposal.y"
		if d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0}); err == nil && d.Type.Valid() {
			subj = subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		evs[i] = fold.Event{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Subject: subj, Raw: raw}
	}
	type variant struct {
		name            string
		recent, written int
		prepare         bool
	}
	fold := func(v variant) string {
		s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20, recentCap: v.recent, writtenBits: v.written})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rng := rand.New(rand.NewPCG(1, 1))
		f := fold.NewFolder()
		// Batches of 1 to ~400 events, as the projector's.
		for lo := 0; lo < len(evs); {
			hi := lo + 1
			for hi < len(evs) && rng.IntN(1+hi%400) != 0 {
				hi++
			}
			batch := slices.Clone(evs[lo:hi]) // Prepare keeps its decoding in them
			b := s.NewBatch()
			if v.prepare {
				if err := f.Prepare(b, batch); err != nil {
					t.Fatal(err)
				}
			}
			for _, ev := range batch {
				if _, err := f.Apply(b, ev); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Commit(batch[len(batch)-1].Seq); err != nil {
				t.Fatal(err)
			}
			lo = hi
		}
		if v.written == 1<<12 && s.written.Load() != nil {
			t.Fatalf("%s: the small written filter did not fill up", v.name)
		}
		d, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	without := fold(variant{name: "no recent, no filter", recent: -1, written: -1})
	for _, v := range []variant{
		{name: "defaults", prepare: true},
		{name: "defaults, Apply only"},
		{name: "37 recent, no filter", recent: 37, written: -1, prepare: true},
		{name: "no recent, filter", recent: -1, prepare: true},
		{name: "no recent, filter, Apply only", recent: -1},
		{name: "filter that fills up", recent: -1, written: 1 << 12, prepare: true},
	} {
		if with := fold(v); with != without {
			t.Fatalf("store digest %s: %s, with no recent proposals and no filter %s", v.name, with, without)
		}
	}
}
