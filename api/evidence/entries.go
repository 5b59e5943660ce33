package evidence

import (
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// EntryBundleWidth is the number of leaves in a full entry bundle (C2SP
// tlog-tiles): bundle N holds the leaves of indexes 256·N to 256·N+255.
const EntryBundleWidth = 1 << TileHeight

// MaxBundleEntryBytes is the largest leaf a C2SP entry bundle can frame
// (a big-endian uint16 length prefix). A ledger leaf can be larger (an
// envelope of up to 1 MiB): a bundle holding one is served only in the
// ledger's long framing (FramingLong).
const MaxBundleEntryBytes = 0xFFFF

// Framing is how an entry bundle frames its leaves.
type Framing int

const (
	// FramingC2SP is the C2SP tlog-tiles framing: each leaf preceded by
	// its length as a big-endian uint16 (leaves of at most
	// MaxBundleEntryBytes).
	FramingC2SP Framing = iota
	// FramingLong is the ledger's framing for logs with longer leaves:
	// each leaf preceded by its length as a big-endian uint32
	// (GET /v1/tile/entries/...?framing=long).
	FramingLong
)

// FramingLongParam is the query (name=value) that asks a ledger for an
// entry bundle in FramingLong.
const FramingLongParam = "framing=long"

// EntriesPath returns the C2SP path of entry bundle n holding w leaves
// (1..256): "tile/entries/<N>[.p/<W>]", N written as in TilePath.
func EntriesPath(n int64, w int) string {
	return "tile/entries/" + strings.TrimPrefix(TilePath(tlog.Tile{H: TileHeight, L: 0, N: n, W: w}), "tile/0/")
}

// ParseEntriesPath parses an entry bundle path ("tile/entries/<N>[.p/<W>]",
// with or without a leading "/"), accepting only the canonical form
// EntriesPath writes, and returns N and W. An error wraps ErrMalformed.
func ParseEntriesPath(path string) (n int64, w int, err error) {
	p := strings.TrimPrefix(path, "/")
	rest, ok := strings.CutPrefix(p, "tile/entries/")
	if !ok {
		return 0, 0, fmt.Errorf("%w: entry bundle path %q", ErrMalformed, path)
	}
	t, err := ParseTilePath("tile/0/" + rest)
	if err != nil || EntriesPath(t.N, t.W) != p {
		return 0, 0, fmt.Errorf("%w: entry bundle path %q", ErrMalformed, path)
	}
	return t.N, t.W, nil
}

// AppendBundleEntry appends one leaf, framed, to an entry bundle. It
// fails, wrapping ErrMalformed, for a leaf longer than the framing holds.
func AppendBundleEntry(bundle, leaf []byte, f Framing) ([]byte, error) {
	switch {
	case f == FramingC2SP && len(leaf) <= MaxBundleEntryBytes:
		bundle = binary.BigEndian.AppendUint16(bundle, uint16(len(leaf)))
	case f == FramingLong && int64(len(leaf)) <= MaxLeafBytes:
		bundle = binary.BigEndian.AppendUint32(bundle, uint32(len(leaf)))
	default:
		return bundle, fmt.Errorf("%w: a leaf of %d bytes does not fit the bundle's framing", ErrMalformed, len(leaf))
	}
	return append(bundle, leaf...), nil
}

// SplitEntryBundle returns the leaves of an entry bundle (sub-slices of
// data), at most EntryBundleWidth. It fails, wrapping ErrMalformed, for
// truncated or excess data.
func SplitEntryBundle(data []byte, f Framing) ([][]byte, error) {
	var out [][]byte
	for len(data) > 0 {
		if len(out) == EntryBundleWidth {
			return nil, fmt.Errorf("%w: entry bundle holds more than %d entries", ErrMalformed, EntryBundleWidth)
		}
		var n int
		switch f {
		case FramingLong:
			if len(data) < 4 {
				return nil, fmt.Errorf("%w: entry bundle: truncated length of entry %d", ErrMalformed, len(out))
			}
			n64 := binary.BigEndian.Uint32(data)
			if int64(n64) > MaxLeafBytes {
				return nil, fmt.Errorf("%w: entry bundle: entry %d of %d bytes", ErrMalformed, len(out), n64)
			}
			n, data = int(n64), data[4:]
		default:
			if len(data) < 2 {
				return nil, fmt.Errorf("%w: entry bundle: truncated length of entry %d", ErrMalformed, len(out))
			}
			n, data = int(binary.BigEndian.Uint16(data)), data[2:]
		}
		if len(data) < n {
			return nil, fmt.Errorf("%w: entry bundle: entry %d needs %d bytes, %d left", ErrMalformed, len(out), n, len(data))
		}
		out = append(out, data[:n:n])
		data = data[n:]
	}
	return out, nil
}
