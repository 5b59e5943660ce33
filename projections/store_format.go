package projections

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// The store's format: how its records are encoded. A ledger reads only
// stores of its own format; one written by another (older or newer)
// ledger is refused at OpenStore with ErrStoreFormat, and the projection
// is rebuilt from the log (`ledger rebuild`: the log is the source of
// truth, the projection a function of it).
//
//	0x00 "format" → decimal format number (a meta key: not in Dump,
//	                Digest or Compare)
//
// Formats: 1 (no format key; before issue 28) stored event refs ('E'),
// event records ('L'), history entries ('H') and changes ('C') as JSON; 2
// stores them binary (encode_bin.go); 3 stores each proposal ('P') in the
// bytes the HTTP API serves for it (encode.go: no HTML escaping, empty
// lists as []) instead of json.Marshal's.
const storeFormat = 3

var formatKey = []byte("\x00format")

// ErrStoreFormat is returned by OpenStore for a store written in a format
// this ledger does not read (see store_format.go): rebuild it.
var ErrStoreFormat = errors.New("projections: store format not supported")

// checkFormat refuses a store of another format and records the format of
// a new one. A store with no format key is format 1 when it holds
// anything, new otherwise.
func checkFormat(db *pebble.DB, dir string, sync *pebble.WriteOptions) error {
	v, closer, err := db.Get(formatKey)
	switch {
	case err == nil:
		f, perr := strconv.Atoi(string(v))
		_ = closer.Close()
		if perr != nil {
			return fmt.Errorf("%w: store %q has format %q, not a number", ErrStoreFormat, dir, v)
		}
		if f != storeFormat {
			return formatError(dir, f)
		}
		return nil
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("projections: open store %q: read format: %w", dir, err)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: metaLowerBound})
	if err != nil {
		return fmt.Errorf("projections: open store %q: %w", dir, err)
	}
	used := it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("projections: open store %q: %w", dir, err)
	}
	if used {
		return formatError(dir, 1)
	}
	if err := db.Set(formatKey, []byte(strconv.Itoa(storeFormat)), sync); err != nil {
		return fmt.Errorf("projections: open store %q: write format: %w", dir, err)
	}
	return nil
}

func formatError(dir string, f int) error {
	return fmt.Errorf("%w: the projection in %q was written in store format %d, this ledger reads format %d; "+
		"rebuild it from the log: stop the server and run `ledger rebuild --data DIR` "+
		"(the log is untouched; the projection is folded again)", ErrStoreFormat, dir, f, storeFormat)
}
