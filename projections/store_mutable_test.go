package projections

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestBatchMutableStats(t *testing.T) {
	s, err := OpenStore(StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	b := s.NewBatch()
	st, err := b.MutableStats("sp")
	if err != nil {
		t.Fatal(err)
	}
	st.Events = 3
	if again, _ := b.MutableStats("sp"); again != st {
		t.Fatal("MutableStats returned another copy within one batch")
	}
	if err := b.PutStats("sp", st); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Stats("sp"); got.Events != 3 {
		t.Fatalf("committed events %d, want 3", got.Events)
	}

	// A new batch hands out a copy: changing it in place touches neither
	// the store nor what Stats returned, and a discarded batch leaves
	// nothing.
	b = s.NewBatch()
	read, _ := b.Stats("sp")
	st, _ = b.MutableStats("sp")
	if st == read {
		t.Fatal("MutableStats returned the value Stats handed out")
	}
	st.Events = 99
	if read.Events != 3 {
		t.Fatalf("the value Stats returned changed to %d", read.Events)
	}
	b.Discard()
	if got, _ := s.Stats("sp"); got.Events != 3 {
		t.Fatalf("a discarded batch changed the store: events %d", got.Events)
	}
	if _, err := b.MutableStats("sp"); !errors.Is(err, ErrBatchDone) {
		t.Fatalf("MutableStats after Discard: %v, want ErrBatchDone", err)
	}
}
