package app

import (
	"fmt"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/lib/markkey"
	"github.com/mewledger/ledger/projections/fold"
)

// openMarkKeys loads the bridge mark seal keys (contract §14, package
// markkey): <data>/bridge-mark.key, made on first start. The appender
// seals with them; every fold of this ledger verifies with them.
func (a *App) openMarkKeys() error {
	path := markkey.Path(a.opts.DataDir)
	mk, created, err := markkey.LoadOrCreate(path)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	a.markKeys = mk
	a.folder = fold.NewFolder()
	a.folder.MarkKeys = mk
	ev := a.log.Info()
	if created {
		ev = ev.Bool("generated", true)
	}
	ev.Str(logging.KeyComponent, "bridge-marks").Str("key_file", path).Str("key_id", mk.SealingKeyID()).Msg("bridge mark seal key")
	return nil
}
