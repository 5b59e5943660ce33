package app

import (
	"context"
	"fmt"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// A stream restored while the ledger serves (contract §16, §9): the
// operator deletes the damaged LEDGER stream and restores it from a
// JetStream snapshot (`nats stream restore`, which keeps the stream's
// creation time) or recreates it with `ledger import` of an earlier
// export (a new creation time). Meanwhile the log check names the
// stream missing (or recreated), /readyz is 503 and folding, expiring
// and signing stop. A stream that is back is the same log when it starts
// at seq 1, reaches the projection's checkpoint and every one of its
// messages up to the checkpoint hashes to the leaf the tree holds (the
// tree is the signed history: the same leaves are the same log, whatever
// the stream's creation time); then the ledger binds the projection to
// it, clears the problem and resumes folding and expiring, with no
// restart. Anything else (a shorter log, another first sequence, a
// message that differs) stays a problem, and the first difference is
// logged; a recreated stream whose import marker is below its last
// sequence (an import under way) is compared once the import is over.

// sameLog reports whether the stream st holds the log the projection
// store was folded from (see above), and if not, why.
func (a *App) sameLog(ctx context.Context, st appendlog.StreamState, store *projections.Store) (bool, string, error) {
	size := uint64(max(store.TreeSize(), 0))
	cp := store.AppliedSeq()
	switch {
	case cp == 0 && size == 0:
		return true, "", nil
	case st.Msgs == 0 || st.FirstSeq != 1:
		return false, fmt.Sprintf("stream %s starts at seq %d (holding %d messages), not at seq 1", subjects.StreamName, st.FirstSeq, st.Msgs), nil
	case st.LastSeq < cp:
		return false, fmt.Sprintf("stream %s ends at seq %d, before the projection's checkpoint (seq %d)", subjects.StreamName, st.LastSeq, cp), nil
	}
	_, d, err := integrity.CheckRange(ctx, a.js, store, 1, size, integrity.CheckOptions{Batch: 1024})
	if err != nil {
		return false, "", err
	}
	if d != nil {
		return false, fmt.Sprintf("stream %s is not the log of the projection: %s", subjects.StreamName, d.Message), nil
	}
	return true, "", nil
}

// adoptLog binds store to the stream st when it is the same log
// (sameLog) and returns "", else the problem.
func (a *App) adoptLog(ctx context.Context, st appendlog.StreamState, store *projections.Store) (string, error) {
	recorded, err := store.StreamIdentity()
	if err != nil {
		return "", fmt.Errorf("app: %w", err)
	}
	if recorded != st.Identity() && st.ImportedThrough > 0 && st.ImportedThrough < st.LastSeq {
		// A recreated stream being imported: the messages above the
		// marker are read with their stream time until the import raises
		// it; compared once the import is over.
		return fmt.Sprintf("stream %s is being imported (the import marker is at seq %d of %d)", subjects.StreamName, st.ImportedThrough, st.LastSeq), nil
	}
	same, why, err := a.sameLog(ctx, st, store)
	if err != nil {
		return "", fmt.Errorf("app: compare stream %s with the tree: %w", subjects.StreamName, err)
	}
	if !same {
		return why, nil
	}
	if id := st.Identity(); recorded != id {
		if err := store.SetStreamIdentity(id); err != nil {
			return "", fmt.Errorf("app: %w", err)
		}
		a.log.Warn().Str(logging.KeyComponent, "log-check").Str("stream", id).Str("was", recorded).Uint64(logging.KeySeq, store.AppliedSeq()).
			Msg("the LEDGER stream was recreated and holds the same log up to the checkpoint: the projection is bound to it")
	}
	return "", nil
}

// recoverLog looks whether a recoverable log problem in force (the
// stream deleted or recreated) is over: the stream is back and is the
// same log. Then the problem is cleared and folding and expiring resume.
// Called by the log check's loop, with its context (not the check's
// bounded one: the comparison reads the whole log once).
func (a *App) recoverLog(ctx context.Context) {
	a.logState.mu.Lock()
	problem, recoverable := a.logState.problem, a.logState.recoverable
	a.logState.mu.Unlock()
	if problem == "" || !recoverable || a.StorageProblem() != "" {
		return
	}
	st, err := appendlog.CheckStream(ctx, a.js, a.streamOptions())
	if err != nil {
		return // still missing, or unreachable: nothing to conclude
	}
	p := a.current()
	why, err := a.adoptLog(ctx, st, p.store)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn().Err(err).Str(logging.KeyComponent, "log-check").Msg("cannot compare the stream that is back with the tree; retrying")
		}
		return
	}
	a.logState.mu.Lock()
	if why != "" {
		again := a.logState.why == why
		a.logState.why = why
		a.logState.mu.Unlock()
		if !again {
			a.log.Error().Str(logging.KeyComponent, "log-check").Str("log_problem", problem).Str("why_not", why).
				Msg("the LEDGER stream is back but is not the projection's log: still not ready")
		}
		return
	}
	paused := a.logState.paused
	a.logState.problem, a.logState.recoverable, a.logState.paused, a.logState.why = "", false, false, ""
	a.logState.mu.Unlock()
	if paused {
		p.proj.Resume()
	}
	p.startExpirer() // holdPipeline stopped it
	a.log.Warn().Str(logging.KeyComponent, "log-check").Str("stream", st.Identity()).Uint64(logging.KeySeq, p.store.AppliedSeq()).
		Msg("the LEDGER stream is back and holds the projection's log: ready again, folding and expiring resumed")
}

// streamGone is the projector's OnStreamGone: its session found no
// stream. The problem is named at once (not at the next log check) and
// folding is held, so that nothing is folded from the stream that comes
// back before it is compared with the projection.
func (a *App) streamGone() {
	p := a.current()
	recorded, err := p.store.StreamIdentity()
	if err != nil {
		return
	}
	a.logState.mu.Lock()
	first := a.logState.problem == ""
	if first {
		a.logState.problem, a.logState.recoverable, a.logState.why = missingProblem(p.store.AppliedSeq(), recorded), true, ""
	}
	problem := a.logState.problem
	a.logState.mu.Unlock()
	if first {
		a.log.Error().Str(logging.KeyComponent, "log-check").Str("log_problem", problem).
			Msg("the log and the projection disagree: not ready, folding and expiring stopped until the stream is back and holds the same log (restored from a backup or an export)")
	}
	a.holdPipeline()
}
