package appendlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// A retry is a duplicate for ever (contract §4).
//
// JetStream remembers a Nats-Msg-Id for the stream's duplicate window (2
// minutes by default) and no longer. Beyond it, the appender asks an
// [Index] of the envelopes the ledger has stored: in the ledger's server,
// the Pebble projection, whose fold indexes every stored envelope by
// (space, id, digest) for ever. Before a group is published, its
// envelopes are looked up in one call; those the index knows are answered
// duplicate:true with the sequence they were first stored at (verified
// against the stored message, as JetStream's answers are) and are not
// published; the others are.
//
// What covers the moment between an append and its projection: the
// index's "not found" is trusted only when every message the stream
// stored more than half the duplicate window ago is at or below the
// index's checkpoint. An envelope stored within the last half window is
// still in JetStream's duplicate window when the group is published (the
// other half is the margin for the publish and its retries), so
// JetStream answers it as a duplicate; one stored earlier is in the
// index. The appender learns how far back the index reaches from the
// stream itself (its last sequence, or the time of the first message
// above the checkpoint, and its duplicate window), at most every quarter
// window while the index keeps up. When the index is further behind (a
// paused or stopped projector, a rebuild catching up, a projection
// starting from nothing), a group waits up to
// AppenderOptions.IndexWait for it, then its appends fail with
// ErrIndexBehind (wrapping ErrPublish: 503, retry later) rather than
// risk storing an envelope twice.

// DefaultIndexWait is AppenderOptions.IndexWait's default.
const DefaultIndexWait = 5 * time.Second

// ErrIndexBehind is wrapped (with ErrPublish) by the error of an append
// the appender did not publish because its index of stored envelopes was
// too far behind the log to tell a retry from a new envelope. Nothing was
// stored; retrying later is safe.
var ErrIndexBehind = errors.New("ledger: the index of stored envelopes is too far behind the log to tell a retry from a new envelope")

// Index is what an Appender asks before publishing: which envelopes the
// ledger has already stored. The ledger's server wires its Pebble
// projection (projections.Store.FirstStored); without one an Appender
// relies on the stream's duplicate window alone.
type Index interface {
	// FirstStored sets seqs[i] to the stream sequence at which an
	// envelope with identity ids[i] was first stored, or 0 when the index
	// knows none (len(seqs) == len(ids)), and returns the index's
	// checkpoint, read before the lookups: every envelope the stream
	// stored at or below it is known to them. It must be safe for
	// concurrent use; an error means "cannot tell" (the appender waits
	// and asks again, as when the index is behind).
	FirstStored(ids []ledger.Identity, seqs []uint64) (checkpoint uint64, err error)
}

// coverage is what the appender last learnt from the stream about how
// far back its index reaches.
type coverage struct {
	mu sync.Mutex
	cp uint64 // the index checkpoint the fact is about
	// at: every message the stream stored before at (the ledger's clock
	// when read from the stream's state, the stream's clock when it is a
	// message's time) is at or below cp.
	at      time.Time
	window  time.Duration // the stream's duplicate window, as last read
	checked time.Time     // when the stream was last read
}

// covered returns nil when a lookup answered at index checkpoint cp can be
// trusted now, else an error wrapping ErrIndexBehind (or the stream's
// error when it could not be read).
func (a *Appender) covered(ctx context.Context, cp uint64) error {
	c := &a.cov
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	valid := !c.at.IsZero() && c.cp <= cp // a lower checkpoint: another index (a rebuild swapped it)
	if valid && now.Sub(c.at) <= c.window/4 {
		return nil
	}
	// Read the stream again, unless that was done a moment ago for the
	// same checkpoint (a group waiting for the index polls).
	if !valid || c.cp < cp || now.Sub(c.checked) >= pollInterval(c.window) {
		if err := a.readCoverage(ctx, cp); err != nil {
			return err
		}
		now = time.Now()
	}
	if lag := now.Sub(c.at); lag > c.window/2 {
		return fmt.Errorf("%w: it holds sequences up to %d, and the oldest message above them was stored %v ago, over half the stream's duplicate window (%v)",
			ErrIndexBehind, c.cp, lag.Round(time.Millisecond), c.window)
	}
	return nil
}

// readCoverage reads the stream's state for index checkpoint cp. Called
// with a.cov.mu held.
func (a *Appender) readCoverage(ctx context.Context, cp uint64) error {
	c := &a.cov
	st, err := a.streamHandle(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.AckTimeout)
	defer cancel()
	t0 := time.Now()
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("ledger: stream %s info: %w", subjects.StreamName, err)
	}
	at := t0 // every message stored before t0 is at or below the last sequence read after it
	if cp < info.State.LastSeq {
		// The first message above the checkpoint (the next one stored, as
		// the log has no holes; next_by_subj skips one if it ever had).
		m, err := st.GetMsg(ctx, cp+1, jetstream.WithGetMsgSubject(subjects.StreamSubjects))
		if err != nil {
			return fmt.Errorf("ledger: stream %s: message after the index's seq %d: %w", subjects.StreamName, cp, err)
		}
		at = m.Time
	}
	c.cp, c.at, c.window, c.checked = cp, at, info.Config.Duplicates, t0
	return nil
}

// pollInterval is how often a group waiting for the index asks again.
func pollInterval(window time.Duration) time.Duration {
	return min(max(window/50, 5*time.Millisecond), 100*time.Millisecond)
}

// streamHandle returns the LEDGER stream's handle, looked up once.
func (a *Appender) streamHandle(ctx context.Context) (jetstream.Stream, error) {
	a.stMu.Lock()
	st := a.stream
	a.stMu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := a.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return nil, err
	}
	a.stMu.Lock()
	a.stream = st
	a.stMu.Unlock()
	return st, nil
}

// lookup asks the index for ids (seqs receives the answers), and checks
// that the answer can be trusted, waiting up to IndexWait (or until stop
// is closed or ctx ends) for the index to catch up when it cannot. With
// failFast it asks once.
func (a *Appender) lookup(ctx context.Context, ids []ledger.Identity, seqs []uint64, failFast bool, stop <-chan struct{}) error {
	deadline := time.Now().Add(a.opts.IndexWait)
	for {
		cp, err := a.opts.Index.FirstStored(ids, seqs)
		if err == nil {
			err = a.covered(ctx, cp)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrIndexBehind) {
			err = fmt.Errorf("%w: %w", ErrIndexBehind, err)
		}
		if failFast || ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
		a.cov.mu.Lock()
		wait := pollInterval(a.cov.window)
		a.cov.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-stop:
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ErrClosed)
		}
	}
}

// known looks p up in the index (waiting for it as lookup does) and
// returns the sequence p was first stored at, verified against the
// stored message; 0 when it is not stored (or the message the index names
// is not p: then the stream decides). No index: 0.
func (a *Appender) known(ctx context.Context, p *ledger.Prepared) (uint64, error) {
	if a.opts.Index == nil {
		return 0, nil
	}
	ids := []ledger.Identity{p.Identity()}
	seqs := []uint64{0}
	if err := a.lookup(ctx, ids, seqs, false, nil); err != nil {
		return 0, err
	}
	if seqs[0] == 0 {
		return 0, nil
	}
	same, err := a.storedSameRetry(ctx, p, seqs[0])
	if err != nil || !same {
		return 0, err
	}
	a.c.known.Add(1)
	return seqs[0], nil
}

// confirmKnown answers p, which the index says was first stored at seq:
// a duplicate when the message at seq is p; else (the index named
// another message) p is published, and the stream's answer stands.
func (a *Appender) confirmKnown(ctx context.Context, p *ledger.Prepared, seq uint64) ledger.Result {
	same, err := a.storedSameRetry(ctx, p, seq)
	switch {
	case err != nil:
		return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject,
			Err: fmt.Errorf("%w: envelope %q: checking the copy stored at %d: %w", ledger.ErrPublish, p.Decoded.Env.ID, seq, err)}
	case same:
		return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject, Seq: seq, Duplicate: true}
	}
	return a.verify(ctx, p, a.publishRetry(ctx, p, p.MsgID, ""))
}

// indexBehindResult is the Result of an append not published because the
// index could not tell whether it was stored (err wraps ErrIndexBehind).
func indexBehindResult(p *ledger.Prepared, err error) ledger.Result {
	return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject,
		Err: fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, err)}
}
