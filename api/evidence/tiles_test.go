package evidence_test

import (
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
)

func TestTilePath(t *testing.T) {
	for _, c := range []struct {
		t    tlog.Tile
		path string
	}{
		{tlog.Tile{H: 8, L: 0, N: 0, W: 256}, "tile/0/000"},
		{tlog.Tile{H: 8, L: 0, N: 1234067, W: 256}, "tile/0/x001/x234/067"},
		{tlog.Tile{H: 8, L: 2, N: 5, W: 17}, "tile/2/005.p/17"},
		{tlog.Tile{H: 8, L: 1, N: 1000, W: 1}, "tile/1/x001/000.p/1"},
	} {
		if got := evidence.TilePath(c.t); got != c.path {
			t.Errorf("TilePath(%+v) = %q, want %q", c.t, got, c.path)
		}
		got, err := evidence.ParseTilePath(c.path)
		if err != nil || got != c.t {
			t.Errorf("ParseTilePath(%q) = %+v, %v", c.path, got, err)
		}
		if got, err := evidence.ParseTilePath("/" + c.path); err != nil || got != c.t {
			t.Errorf("ParseTilePath(/%q) = %+v, %v", c.path, got, err)
		}
	}
	for _, bad := range []string{"tile/0/1", "tile/0/0000", "tile/0/000.p/256", "tile/0/000.p/0", "tile/entries/000",
		"tile/data/000", "tile/8/0/000", "tile/-1/000", "tile/64/000", "tile/0/x000/001", "tiles/0/000", "tile/0/001.p/01"} {
		if _, err := evidence.ParseTilePath(bad); !errors.Is(err, evidence.ErrMalformed) {
			t.Errorf("ParseTilePath(%q): err %v", bad, err)
		}
	}
}

// TestTileData: a client holding only tiles (served from the stored
// hashes) computes the same root and proofs.
func TestTileData(t *testing.T) {
	tr := buildTree(t, 300, "a")
	tiles := map[tlog.Tile][]byte{}
	for _, tl := range tlog.NewTiles(evidence.TileHeight, 0, 300) {
		data, err := tlog.ReadTileData(tl, tr)
		if err != nil {
			t.Fatal(err)
		}
		tiles[tl] = data
	}
	r := tlog.TileHashReader(tlog.Tree{N: 300, Hash: tr.root(t, 300)}, tileMap(tiles))
	if h, err := tlog.TreeHash(300, r); err != nil || h != tr.root(t, 300) {
		t.Fatalf("root from tiles %s, %v", h, err)
	}
	p, err := tlog.ProveRecord(300, 277, r)
	if err != nil {
		t.Fatal(err)
	}
	cp := evidence.Checkpoint{Origin: "o", Size: 300, Hash: tr.root(t, 300)}
	if err := evidence.VerifyInclusion(cp, 277, evidence.LeafHash(tr.leaves[277]), p); err != nil {
		t.Fatal(err)
	}
}

type tileMap map[tlog.Tile][]byte

func (m tileMap) Height() int { return evidence.TileHeight }
func (m tileMap) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		d, ok := m[t]
		if !ok {
			return nil, errors.New("no tile " + evidence.TilePath(t))
		}
		out[i] = d
	}
	return out, nil
}
func (m tileMap) SaveTiles([]tlog.Tile, [][]byte) {}

func FuzzParseTilePath(f *testing.F) {
	f.Add("tile/0/x001/x234/067")
	f.Add("tile/2/005.p/17")
	f.Fuzz(func(t *testing.T, p string) {
		tl, err := evidence.ParseTilePath(p)
		if err != nil {
			return
		}
		if got := evidence.TilePath(tl); got != p && "/"+got != p {
			t.Fatalf("%q parses to %+v, which is %q", p, tl, got)
		}
	})
}
