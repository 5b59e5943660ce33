package main

import (
	"errors"
	"io/fs"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/markkey"
	"github.com/mewledger/ledger/projections/fold"
)

// folder returns the fold of the offline commands that fold the log
// (rebuild, verify, at, replay): with the bridge mark seal keys of the
// data directory (<data>/bridge-mark.key, contract §14), as `ledger serve`
// folds. Without the file the fold honours no bridge mark, and says so.
func (o *opsFlags) folder(log zerolog.Logger) (*fold.Folder, error) {
	f := fold.NewFolder()
	if o.data == "" {
		return f, nil
	}
	path := markkey.Path(o.data)
	mk, err := markkey.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Warn().Str("key_file", path).Msg("no bridge mark seal key: no bridge mark is honoured (recorders, gap windows and coverage are lost; the log is not)")
		return f, nil
	case err != nil:
		return nil, err
	}
	f.MarkKeys = mk
	return f, nil
}
