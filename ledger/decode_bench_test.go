package ledger_test

import (
	"testing"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/ledger"
)

// BenchmarkDecodeBenchMix decodes the envelopes of `ledger bench`: the
// workload.BenchMix stream padded to ~600 bytes.
func BenchmarkDecodeBenchMix(b *testing.B) {
	raws := workload.New(workload.Options{Seed: 6, Mix: workload.BenchMix, PadTo: 600}).Batch(4096)
	size := 0
	for _, r := range raws {
		size += len(r)
	}
	b.SetBytes(int64(size / len(raws)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := ledger.Decode(raws[i%len(raws)], ledger.DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
