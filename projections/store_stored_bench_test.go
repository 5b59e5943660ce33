package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
)

// BenchmarkFirstStored measures the append path's lookup of one group
// (Store.FirstStored) in a store that has folded 20,000 events: groups of
// new envelopes (the common case: absent keys) and of retries (every key
// found), of 16 and 256 envelopes. One op is one group.
func BenchmarkFirstStored(b *testing.B) {
	evs := benchEvents(b, 20000)
	s, err := projections.OpenStore(projections.StoreOptions{Dir: b.TempDir(), FS: vfs.Default})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f := fold.NewFolder()
	batch := s.NewBatch()
	stored := make([]ledger.Identity, 0, len(evs))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, ev := range evs {
		if _, err := f.Apply(batch, ev); err != nil {
			b.Fatal(err)
		}
		d, err := ledger.Decode(ev.Raw, ledger.DecodeOptions{Now: t0})
		if err != nil {
			b.Fatal(err)
		}
		stored = append(stored, ledger.Identity{Space: "default", ID: d.Env.ID, Digest: d.Digest})
		if (i+1)%1000 == 0 {
			if err := batch.Commit(ev.Seq); err != nil {
				b.Fatal(err)
			}
			batch = s.NewBatch()
		}
	}
	batch.Discard()
	for _, n := range []int{16, 256} {
		for _, known := range []bool{false, true} {
			name := fmt.Sprintf("group=%d/new", n)
			if known {
				name = fmt.Sprintf("group=%d/retries", n)
			}
			b.Run(name, func(b *testing.B) {
				groups := make([][]ledger.Identity, 64)
				for g := range groups {
					groups[g] = make([]ledger.Identity, n)
					for i := range n {
						if known {
							groups[g][i] = stored[(g*n+i*7919)%len(stored)]
						} else {
							groups[g][i] = ledger.Identity{Space: "default", ID: fmt.Sprintf("new-%d-%d", g, i), Digest: "sha256:x"}
						}
					}
				}
				seqs := make([]uint64, n)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.FirstStored(groups[i%len(groups)], seqs); err != nil {
						b.Fatal(err)
					}
					if known && seqs[0] == 0 {
						b.Fatal("a stored envelope was not found")
					}
				}
			})
		}
	}
}
