package projections

import (
	"testing"

	"github.com/mewledger/ledger/projections/fold"
)

// addLeaves adds the Merkle tree leaves of evs to b, as the Pipeline does
// with its fold: for tests that fold into batches by hand and compare the
// store with a pipeline's. The store must have committed every event
// before evs[0].
func addLeaves(t testing.TB, b *Batch, evs []fold.Event) {
	t.Helper()
	tw, err := newTreeWriter(b.s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := tw.add(b, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
}
