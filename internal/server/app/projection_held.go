package app

import (
	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/projections/projector"
)

// A sequence missing above the projection's checkpoint (contract §16):
// the projector holds at the last good sequence (projector/hold.go) and
// the hold is damage like the rest: kind missing at that sequence in
// a.damage (/readyz 503 log_damaged, /v1/status.log_damage, the
// Ledger-Log-Damaged mark, signing stopped at the last good size), and
// /v1/status.projection_held says where the projection stands and why.
// Once the sequence is back the projector resumes and the damage is
// cleared, with no restart.

// projectionHeld is the projector's OnHold.
func (a *App) projectionHeld(h *projector.Hold) {
	if h == nil {
		a.heldMu.Lock()
		seq := a.heldSeq
		a.heldSeq = 0
		a.heldMu.Unlock()
		if seq != 0 && a.damage.Clear(api.DamageMissing, seq) {
			a.log.Warn().Str(logging.KeyComponent, "projector").Uint64(logging.KeySeq, seq).
				Msg("the missing sequence is back: the projection resumes and the damage is cleared")
		}
		return
	}
	a.heldMu.Lock()
	first := a.heldSeq != h.Missing
	a.heldSeq = h.Missing
	a.heldMu.Unlock()
	// Reported on holding, and again at a later look when nothing lower
	// is in force (a damage cleared meanwhile must not hide the hold).
	if cur, ok := a.damage.Current(); first || !ok || cur.Seq > h.Missing {
		a.damage.Report(integrity.NewDamage(api.DamageMissing, h.Missing, "", ""))
	}
}

// ProjectionHeld returns where the projection is held on a missing
// sequence, nil when it is not.
func (a *App) ProjectionHeld() *api.ProjectionHeld {
	p := a.current()
	if p == nil {
		return nil
	}
	h, ok := p.proj.Held()
	if !ok {
		return nil
	}
	return &api.ProjectionHeld{Seq: h.Missing - 1, Missing: h.Missing, Reason: h.Reason}
}
