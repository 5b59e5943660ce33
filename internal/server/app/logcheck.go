package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// The log and the projection checked against each other (issue 15,
// item 2). The projection records the identity of the stream it was
// folded from (its creation time, projections.Store.SetStreamIdentity);
// at start and every LogCheckInterval while serving the ledger reads the
// stream and compares:
//
//   - the stream is missing (deleted): never recreated empty under a
//     projection that has folded events;
//   - the stream was recreated (another creation time);
//   - the log starts past sequence 1 without an import marker: history
//     was removed (an edited max age or limit aged it out);
//   - the projection's checkpoint is beyond the log's last sequence;
//   - a setting the ledger cannot use (subjects, deny flags, storage, ...).
//
// At start any of these is New's error (the process does not start; it
// never starts afresh silently), except a recreated stream that holds the
// same log (restore.go). While serving, the first found is kept (until a
// restart; a stream deleted or recreated until it is back and holds the
// same log, restore.go): /readyz is 503, /v1/status carries it as
// log_problem, it is logged at error level, the projector is paused and
// the expirer stopped (nothing more is folded into, or appended from, a
// projection that no longer matches its log), and online verify and
// rebuild fail at once with it. The ledger's own settings (max age,
// limits, discard, duplicate window, ...) changed by someone else are put
// back and logged at error level, each with its old and new value.

// DefaultLogCheckInterval is Options.LogCheckInterval's default.
const DefaultLogCheckInterval = 5 * time.Second

// ErrLogProblem is returned (wrapped, with what was found) by New and by
// the online operations when the log and the projection disagree.
var ErrLogProblem = errors.New("app: log and projection disagree")

// logState is the sticky problem found while serving.
type logState struct {
	mu      sync.Mutex
	problem string
	// recoverable: the problem is the stream deleted or recreated, which
	// the ledger gets over by itself once the stream is back and is the
	// same log (restore.go).
	recoverable bool
	// paused: holdPipeline paused the projector (resumed on recovery).
	paused bool
	// why is the last reason a recovery was refused (logged once).
	why string
}

// LogProblem returns what the log check found wrong while serving, else
// the damage the scrub or a proof found in the log (scrub.go), or "".
func (a *App) LogProblem() string {
	a.logState.mu.Lock()
	p := a.logState.problem
	a.logState.mu.Unlock()
	if p == "" && a.damage != nil {
		if d, ok := a.damage.Current(); ok {
			p = d.Message
		}
	}
	return p
}

func (a *App) streamOptions() appendlog.StreamOptions {
	return appendlog.StreamOptions{Replicas: a.opts.Replicas, DuplicateWindow: a.opts.DupWindow}
}

// openStream checks (or, for a projection that has folded nothing and
// records no stream, creates) the LEDGER stream at start, compares it
// with store and records its identity when the store has none.
func (a *App) openStream(ctx context.Context, store *projections.Store) error {
	st, err := appendlog.CheckStream(ctx, a.js, a.streamOptions())
	if errors.Is(err, appendlog.ErrStreamMissing) {
		recorded, rerr := store.StreamIdentity()
		if rerr != nil {
			return fmt.Errorf("app: %w", rerr)
		}
		if store.AppliedSeq() > 0 || recorded != "" {
			return fmt.Errorf("%w: %s", ErrLogProblem, missingProblem(store.AppliedSeq(), recorded))
		}
		if _, err := appendlog.EnsureStream(ctx, a.js, a.streamOptions()); err != nil {
			return fmt.Errorf("app: %w", err)
		}
		st, err = appendlog.CheckStream(ctx, a.js, a.streamOptions())
	}
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	for _, r := range st.Restored {
		// At start this is also an operator's new flag (--replicas,
		// --dup-window): while serving, the log check compares with the
		// same options, so only someone else's change is put back.
		a.log.Warn().Str(logging.KeyComponent, "log-check").Str("setting", r).
			Msg("the LEDGER stream's settings differed from the ledger's; brought to the ledger's")
	}
	problem, recoverable, err := a.compareLog(st, store, store.AppliedSeq())
	if err != nil {
		return err
	}
	if problem != "" && recoverable {
		// A stream restored from a backup or an import: the same log
		// when it holds the same leaves up to the checkpoint.
		why, err := a.adoptLog(ctx, st, store)
		if err != nil {
			return err
		}
		if why == "" {
			problem = "" // the same log: bound to it (restore.go)
		} else {
			problem += "; it is not the same log: " + why
		}
	}
	if problem != "" {
		return fmt.Errorf("%w: %s", ErrLogProblem, problem)
	}
	if a.stream, err = a.js.Stream(ctx, subjects.StreamName); err != nil {
		return fmt.Errorf("app: stream %s: %w", subjects.StreamName, err)
	}
	return nil
}

func missingProblem(cp uint64, recorded string) string {
	from := "an earlier stream"
	if recorded != "" {
		from = "stream " + recorded
	}
	return fmt.Sprintf("stream %s is missing (deleted?): the projection is at seq %d, folded from %s; "+
		"the ledger does not recreate it empty under it (restore the stream, or import an export and rebuild the projection)",
		subjects.StreamName, cp, from)
}

// compareLog compares the stream st with store, whose checkpoint was cp
// before st was read, and records st's identity in a store that has none.
// It returns the problem found, or "", and whether it is one the ledger
// can get over by itself (a recreated stream: restore.go). The checkpoint must be read before
// the stream: while serving, the projector folds on, and a checkpoint read
// after the stream's state may be past its last sequence for events
// appended in between (a false "checkpoint beyond the log").
func (a *App) compareLog(st appendlog.StreamState, store *projections.Store, cp uint64) (string, bool, error) {
	recorded, err := store.StreamIdentity()
	if err != nil {
		return "", false, fmt.Errorf("app: %w", err)
	}
	id := st.Identity()
	switch {
	case recorded != "" && recorded != id:
		return fmt.Sprintf("stream %s was recreated: it is %s, but the projection (at seq %d) was folded from %s",
			subjects.StreamName, id, cp, recorded), true, nil
	case cp > st.LastSeq:
		return fmt.Sprintf("the projection's checkpoint, seq %d, is beyond the last sequence of stream %s (%d): the log is not the one the projection was folded from",
			cp, id, st.LastSeq), false, nil
	case st.FirstSeq > 1 && st.LastSeq > 0 && st.ImportedThrough == 0 && cp > 0 && a.damage != nil:
		// The tree holds leaves the stream no longer has (a block file
		// lost, or history aged out): damage (contract §16), not a
		// refusal to serve: reads go on, marked, and signing stops.
		exp := ""
		if h, err := store.LeafHash(0); err == nil {
			exp = h.String()
		}
		if a.damage.Report(integrity.NewDamage(api.DamageMissing, 1, exp, "")) {
			a.log.Error().Str(logging.KeyComponent, "log-check").Uint64(logging.KeySeq, 1).
				Msgf("stream %s starts at seq %d: seq 1..%d are missing (a block file lost, or a max age or limit set on the stream)", id, st.FirstSeq, st.FirstSeq-1)
		}
	case st.FirstSeq > 1 && st.LastSeq > 0 && st.ImportedThrough == 0:
		return fmt.Sprintf("stream %s starts at seq %d with no import marker: seq 1..%d were removed (a max age or limit set on the stream ages the ledger's history out)",
			id, st.FirstSeq, st.FirstSeq-1), false, nil
	}
	if recorded == "" {
		if err := store.SetStreamIdentity(id); err != nil {
			return "", false, fmt.Errorf("app: %w", err)
		}
		a.log.Info().Str(logging.KeyComponent, "log-check").Str("stream", id).Uint64(logging.KeySeq, cp).Msg("projection bound to the stream")
	}
	return "", false, nil
}

func (a *App) logRestored(restored []string) {
	for _, r := range restored {
		a.log.Error().Str(logging.KeyComponent, "log-check").Str("setting", r).
			Msg("someone changed the LEDGER stream's settings; the ledger's own value is put back")
	}
}

// checkLog runs the check once while serving; a problem found is kept
// (see the file comment). It returns the problem in force, or an error
// when the check could not be made (NATS unreachable: nothing is
// concluded).
func (a *App) checkLog(ctx context.Context) (string, error) {
	if p := a.StorageProblem(); p != "" {
		// JetStream is off: nothing to conclude about the log.
		return "", errors.New(p)
	}
	a.logState.mu.Lock()
	held := a.logState.problem
	a.logState.mu.Unlock()
	if held != "" {
		a.holdPipeline()
		return held, nil
	}
	p := a.current()
	cp := p.store.AppliedSeq() // before the stream's state: see compareLog
	st, err := appendlog.CheckStream(ctx, a.js, a.streamOptions())
	problem, recoverable := "", false
	switch {
	case errors.Is(err, appendlog.ErrStreamMissing):
		recorded, rerr := p.store.StreamIdentity()
		if rerr != nil {
			return "", rerr
		}
		problem, recoverable = missingProblem(p.store.AppliedSeq(), recorded), true
	case errors.Is(err, appendlog.ErrStreamConfig):
		problem = err.Error()
	case err != nil:
		return "", err
	default:
		a.logRestored(st.Restored)
		if problem, recoverable, err = a.compareLog(st, p.store, cp); err != nil {
			return "", err
		}
		if problem == "" {
			if err := a.reapDurables(ctx); err != nil {
				return "", err
			}
		}
	}
	if problem == "" {
		return "", nil
	}
	a.logState.mu.Lock()
	first := a.logState.problem == ""
	if first {
		a.logState.problem, a.logState.recoverable, a.logState.why = problem, recoverable, ""
	}
	problem = a.logState.problem
	a.logState.mu.Unlock()
	if first && recoverable {
		a.log.Error().Str(logging.KeyComponent, "log-check").Str("log_problem", problem).
			Msg("the log and the projection disagree: not ready, folding and expiring stopped until the stream is back and holds the same log (restored from a backup or an export)")
	} else if first {
		a.log.Error().Str(logging.KeyComponent, "log-check").Str("log_problem", problem).
			Msg("the log and the projection disagree: not ready, folding and expiring stopped until an operator acts and restarts the ledger")
	}
	a.holdPipeline()
	return problem, nil
}

// holdPipeline pauses the projector and stops the expirer of the current
// pipeline (a log problem is in force).
func (a *App) holdPipeline() {
	p := a.current()
	if !p.proj.Paused() {
		p.proj.Pause()
		a.logState.mu.Lock()
		a.logState.paused = true
		a.logState.mu.Unlock()
	}
	p.stopExpirer()
}

// runLogCheck checks every LogCheckInterval until ctx is done.
func (a *App) runLogCheck(ctx context.Context) {
	t := time.NewTicker(a.opts.LogCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, a.opts.LogCheckInterval+5*time.Second)
		if _, err := a.checkLog(cctx); err != nil && ctx.Err() == nil {
			a.log.Warn().Err(err).Str(logging.KeyComponent, "log-check").Msg("cannot check the log against the projection")
		}
		cancel()
		// Not bounded by the check's interval: comparing a restored
		// stream with the tree reads the whole log once.
		a.recoverLog(ctx)
	}
}

// reapDurables deletes the durable consumers of the LEDGER stream that are
// not the ledger's own (Options.Durables), when that list is set, and
// logs each deletion. Ephemeral consumers (no durable name) are left to
// their inactivity threshold.
func (a *App) reapDurables(ctx context.Context) error {
	if a.opts.Durables == nil {
		return nil
	}
	allowed := map[string]bool{a.opts.Durable: true}
	for _, d := range a.opts.Durables {
		allowed[d] = true
	}
	s, err := a.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return fmt.Errorf("app: consumers of %s: %w", subjects.StreamName, err)
	}
	lister := s.ListConsumers(ctx)
	var extra []string
	for ci := range lister.Info() {
		if d := ci.Config.Durable; d != "" && !allowed[d] {
			extra = append(extra, d)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("app: consumers of %s: %w", subjects.StreamName, err)
	}
	for _, d := range extra {
		if err := s.DeleteConsumer(ctx, d); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("app: delete consumer %q: %w", d, err)
		}
		a.log.Error().Str(logging.KeyComponent, "log-check").Str(logging.KeyDurable, d).
			Msg("deleted a durable consumer of the LEDGER stream that is not in nats.service.durables: only the ledger's projectors may keep one")
	}
	return nil
}
