package app

import (
	"io/fs"
	"path/filepath"

	"github.com/mewledger/ledger/internal/server/metrics"
)

// registerHeld feeds ledger_held{kind} (issue 36 item 3): what callers
// hold now, one series per kind, read at scrape time.
func (a *App) registerHeld() {
	m := a.metrics
	if a.holds != nil {
		m.SetHeld(metrics.HeldHolds, func() int { n, _ := a.holds.Open(""); return n })
	}
	if a.streams != nil {
		m.SetHeld(metrics.HeldStreams, func() int { n, _ := a.streams.Open(""); return n })
	}
	if a.mcpHTTP != nil {
		m.SetHeld(metrics.HeldMCPSessions, func() int { n, _ := a.mcpHTTP.Sessions(""); return n })
	}
	if a.mcp != nil {
		m.SetHeld(metrics.HeldMCPSubscriptions, func() int { n, _ := a.mcp.Subscriptions(); return n })
		m.SetHeld(metrics.HeldMCPWatchers, func() int { _, n := a.mcp.Subscriptions(); return n })
	}
	if a.asOf != nil {
		m.SetHeld(metrics.HeldAsOfFolds, func() int { n, _ := a.asOf.Held(); return n })
		m.SetHeld(metrics.HeldAsOfCached, func() int { _, n := a.asOf.Held(); return n })
	}
}

// asOfRoom is the as-of cache's room check: the temporary directory's
// free bytes, and what a fold needs there (about the live projection's
// size, plus what the ledger keeps free to make progress).
func (a *App) asOfRoom() (free, need uint64, err error) {
	free, err = freeBytes(a.opts.TmpDir())
	if err != nil {
		return 0, 0, err
	}
	return free, dirSize(a.opts.ProjectionDir()) + a.disk.resume, nil
}

// dirSize sums the sizes of the files under dir (what it could read).
func dirSize(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += uint64(info.Size())
			}
		}
		return nil
	})
	return n
}

// AsOfStores reports the as-of reads' temporary stores open now and the
// most open at once so far (at most 5: docs/security.md).
func (a *App) AsOfStores() (open, peak int) {
	if a.asOf == nil {
		return 0, 0
	}
	return a.asOf.Stores()
}
