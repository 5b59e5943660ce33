package projections

import (
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkEventsFiltered measures a filtered page of GET /v1/events
// (EventsRaw, limit 100, one or two of type, effect and kind, either
// order, from a random sequence) over 30,000 folded events of a mixed log.
func BenchmarkEventsFiltered(b *testing.B) {
	log := mixLog(b, 30000)
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), MemTableSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pl, err := NewPipeline(s, PipelineOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, run := range runs(log, 0, 1000) {
		if err := pl.Fold(run, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := pl.Close(); err != nil {
		b.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	qs := []EventQuery{{Type: "proposal"}, {Effect: "applied"}, {Type: "fulfil", Effect: "applied"}, {Kind: "mcp/proposal"}}
	rng := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	for b.Loop() {
		q := qs[rng.Intn(len(qs))]
		q.Desc = rng.Intn(2) == 0
		q.SinceSeq = uint64(rng.Intn(len(log)))
		if q.Desc {
			q.UntilSeq, q.SinceSeq = q.SinceSeq+1, 0
		}
		q.Limit = 100
		if _, err := s.EventsRaw(q); err != nil {
			b.Fatal(err)
		}
	}
}
