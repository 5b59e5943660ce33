package evidence

import (
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// TileHeight is the height of the C2SP tlog-tiles hash tiles: a full tile
// holds 2^8 = 256 hashes of one level.
const TileHeight = 8

// TilePath returns the C2SP tlog-tiles path of a hash tile (whose H must
// be TileHeight): "tile/<L>/<N>[.p/<W>]", N written in groups of three
// digits, every group but the last prefixed with "x" (1234067 →
// "x001/x234/067"), ".p/<W>" only for a partial tile of W < 256 hashes.
func TilePath(t tlog.Tile) string {
	// tlog's path is "tile/<H>/<L>/<N>[.p/<W>]"; the C2SP layout fixes H.
	p := t.Path()
	return "tile/" + strings.TrimPrefix(p, fmt.Sprintf("tile/%d/", t.H))
}

// ParseTilePath parses a C2SP hash tile path ("tile/<L>/<N>[.p/<W>]",
// with or without a leading "/"), accepting only the canonical form
// TilePath writes. Entry bundles ("tile/entries/...") are not hash tiles
// and are refused. An error wraps ErrMalformed.
func ParseTilePath(path string) (tlog.Tile, error) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(path, "/"), "tile/")
	if !ok || strings.HasPrefix(rest, "data/") || strings.HasPrefix(rest, "entries/") {
		return tlog.Tile{}, fmt.Errorf("%w: tile path %q", ErrMalformed, path)
	}
	t, err := tlog.ParseTilePath(fmt.Sprintf("tile/%d/%s", TileHeight, rest))
	if err != nil || t.L < 0 || t.L > 63 || TilePath(t) != strings.TrimPrefix(path, "/") {
		return tlog.Tile{}, fmt.Errorf("%w: tile path %q", ErrMalformed, path)
	}
	return t, nil
}
