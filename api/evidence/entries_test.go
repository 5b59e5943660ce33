package evidence_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mewledger/ledger/api/evidence"
)

func TestEntriesPath(t *testing.T) {
	for _, c := range []struct {
		n    int64
		w    int
		path string
	}{{0, 256, "tile/entries/000"}, {0, 3, "tile/entries/000.p/3"}, {1234067, 256, "tile/entries/x001/x234/067"}} {
		if got := evidence.EntriesPath(c.n, c.w); got != c.path {
			t.Errorf("EntriesPath(%d, %d) = %q, want %q", c.n, c.w, got, c.path)
		}
		n, w, err := evidence.ParseEntriesPath("/" + c.path)
		if err != nil || n != c.n || w != c.w {
			t.Errorf("ParseEntriesPath(%q) = %d, %d, %v", c.path, n, w, err)
		}
	}
	for _, bad := range []string{"tile/entries/0", "tile/entries/000.p/256", "tile/entries/000.p/0", "tile/0/000", "tile/entries/", "tile/entries/x000/000"} {
		if _, _, err := evidence.ParseEntriesPath(bad); !errors.Is(err, evidence.ErrMalformed) {
			t.Errorf("ParseEntriesPath(%q): %v", bad, err)
		}
	}
}

func TestEntryBundleFraming(t *testing.T) {
	leaves := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte("b"), 300)}
	for _, f := range []evidence.Framing{evidence.FramingC2SP, evidence.FramingLong} {
		var b []byte
		for _, l := range leaves {
			var err error
			if b, err = evidence.AppendBundleEntry(b, l, f); err != nil {
				t.Fatal(err)
			}
		}
		got, err := evidence.SplitEntryBundle(b, f)
		if err != nil || len(got) != 3 || !bytes.Equal(got[2], leaves[2]) || len(got[1]) != 0 {
			t.Fatalf("framing %d: %q %v", f, got, err)
		}
		if _, err := evidence.SplitEntryBundle(b[:len(b)-1], f); !errors.Is(err, evidence.ErrMalformed) {
			t.Fatalf("framing %d, truncated: %v", f, err)
		}
	}
	if b, err := evidence.AppendBundleEntry([]byte("x"), make([]byte, 1<<16), evidence.FramingC2SP); !errors.Is(err, evidence.ErrMalformed) || string(b) != "x" {
		t.Fatalf("a 64 KiB leaf in the C2SP framing: %v", err)
	}
}
