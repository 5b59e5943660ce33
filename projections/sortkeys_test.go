package projections

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// TestSortWrites checks that sortWrites orders keys as bytes.Compare does:
// tables of keys with long shared prefixes, keys that are prefixes of
// others, zero bytes where an abbreviation pads, duplicates, empty keys.
func TestSortWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0xFF}
	for round := 0; round < 300; round++ {
		var ops []kv
		n := rng.IntN(200)
		prefixes := [][]byte{[]byte("Hdefault\x00\x01"), []byte("Js"), []byte("J"), []byte("L"), {}, []byte("Hdefault\x00\x01p-0000")}
		for i := 0; i < n; i++ {
			k := append([]byte(nil), prefixes[rng.IntN(len(prefixes))]...)
			for j := rng.IntN(12); j > 0; j-- {
				k = append(k, alphabet[rng.IntN(len(alphabet))])
			}
			ops = append(ops, kv{key: k})
			if rng.IntN(10) == 0 {
				ops = append(ops, kv{key: bytes.Clone(k)})
			}
		}
		order := sortWrites(nil, ops)
		if len(order) != len(ops) {
			t.Fatalf("round %d: %d of %d writes", round, len(order), len(ops))
		}
		seen := make([]bool, len(ops))
		for i, sk := range order {
			if seen[sk.idx] {
				t.Fatalf("round %d: write %d twice", round, sk.idx)
			}
			seen[sk.idx] = true
			if i > 0 && bytes.Compare(ops[order[i-1].idx].key, ops[sk.idx].key) > 0 {
				t.Fatalf("round %d: %q before %q", round, ops[order[i-1].idx].key, ops[sk.idx].key)
			}
		}
	}
}

// BenchmarkSortWrites sorts the writes of a commit of 1000 bench events:
// sortWrites against a plain sort of their indexes by bytes.Compare.
func BenchmarkSortWrites(b *testing.B) {
	g := workload.New(workload.Options{Seed: 42, PadTo: 600})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := s.NewBatch()
	f := fold.NewFolder()
	for i := 1; i <= 1000; i++ {
		raw := g.Next()
		d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0})
		if err != nil {
			b.Fatal(err)
		}
		subj := subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		if _, err := f.Apply(batch, fold.Event{Seq: uint64(i), Time: t0.Add(time.Duration(i) * time.Millisecond), Subject: subj, Raw: raw}); err != nil {
			b.Fatal(err)
		}
	}
	var c commitBuf
	ops, err := batch.collect(&c)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("abbreviated", func(b *testing.B) {
		var order []sortKey
		for b.Loop() {
			order = sortWrites(order, ops)
		}
		b.ReportMetric(float64(len(ops)), "writes")
	})
	b.Run("bytes.Compare", func(b *testing.B) {
		var order []int32
		for b.Loop() {
			order = order[:0]
			for i := range ops {
				order = append(order, int32(i))
			}
			slices.SortFunc(order, func(x, y int32) int { return bytes.Compare(ops[x].key, ops[y].key) })
		}
	})
}
