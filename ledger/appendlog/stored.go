package appendlog

import (
	"cmp"
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
// index's "not found" is trusted alone only when every message the stream
// stored more than half the duplicate window ago is at or below the
// index's checkpoint. An envelope stored within the last half window is
// still in JetStream's duplicate window when the group is published (the
// other half is the margin for the publish and its retries), so
// JetStream answers it as a duplicate; one stored earlier is in the
// index. The appender learns how far back the index reaches from the
// stream itself (its last sequence, or the time of the first message
// above the checkpoint, and its duplicate window), at most every quarter
// window while the index keeps up.
//
// When the index is further behind (a paused or stopped projector, a
// rebuild catching up, a projection starting from nothing, its disk
// full) or cannot answer at all, the appender does not wait for it: the
// envelopes it does not know are looked up in the log itself, above its
// checkpoint, through the stream's per-subject index (logFind). A retry
// is published on the same subject as the envelope it repeats (the
// subject is a function of the envelope), so only that subject's
// messages above the checkpoint are read: one request for a subject with
// none (a new proposal), one more per message on it otherwise. A stopped
// projector therefore slows appends down (one or more stream reads per
// envelope) but refuses none; the log, not a view derived from it, decides
// whether an envelope is stored. Appends fail (ErrLogLookup, wrapped with
// ErrPublish: 503, retry later) only when the stream cannot be read.
//
// One case the log lookup does not see: an envelope's bytes published by
// hand on another subject than the one the ledger files it under (only a
// publisher with direct rights on the stream can do that). The index,
// which decodes every stored message, knows it once it has folded it.

// ErrLogLookup is wrapped (with ErrPublish) by the error of an append the
// appender did not publish because it could not read the log to tell a
// retry from a new envelope (the index being behind). Nothing was stored;
// retrying later is safe.
var ErrLogLookup = errors.New("ledger: the log could not be read to tell a retry from a new envelope")

// errIndexBehind: the index's answer cannot be trusted alone (covered).
var errIndexBehind = errors.New("ledger: the index of stored envelopes is behind the log")

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
	// concurrent use; an error means "cannot tell" (the appender then
	// looks the envelopes up in the whole log).
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
// trusted alone now, else errIndexBehind (or the stream's error when it
// could not be read).
func (a *Appender) covered(ctx context.Context, cp uint64) error {
	c := &a.cov
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	valid := !c.at.IsZero() && c.cp <= cp // a lower checkpoint: another index (a rebuild swapped it)
	if valid && now.Sub(c.at) <= c.window/4 {
		return nil
	}
	// Read the stream again, unless that was done a moment ago: while the
	// index is behind, every group asks. A fact read for a lower
	// checkpoint of the same index still holds for cp (the index only
	// goes forward), so an index folding along does not make each group
	// read the stream either.
	if !valid || now.Sub(c.checked) >= pollInterval(c.window) {
		if err := a.readCoverage(ctx, cp); err != nil {
			return err
		}
		now = time.Now()
	}
	if lag := now.Sub(c.at); lag > c.window/2 {
		return errIndexBehind
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

// pollInterval is how often, while the index is behind, the stream is
// read again for the same checkpoint.
func pollInterval(window time.Duration) time.Duration {
	return min(max(window/40, 5*time.Millisecond), 3*time.Second)
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

// lookup answers, for each of ps, the sequence it was first stored at
// (seqs[i]; 0: not stored), in one Index call: its answers stand when
// the Index is covered (above); when it is behind (or cannot answer),
// the members it does not know are looked up in the log itself, above its
// checkpoint (logFind, at most lookupConcurrency at once). An error means
// the log could not be read: nothing of ps may be published.
func (a *Appender) lookup(ctx context.Context, ps []*ledger.Prepared, ids []ledger.Identity, seqs []uint64) error {
	cp, err := a.opts.Index.FirstStored(ids, seqs)
	if err == nil {
		err = a.covered(ctx, cp)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errIndexBehind) {
			return err // the stream could not be read
		}
	} else {
		cp = 0 // the index cannot answer (a rebuild swapping it): the whole log
		clear(seqs)
	}
	a.logLookups.Add(1)
	return a.logFindAll(ctx, ps, seqs, cp)
}

// lookupConcurrency bounds the log lookups of one group that run at once.
const lookupConcurrency = 16

// logFindAll sets seqs[i], for each of ps the Index did not know
// (seqs[i] == 0), to where the log stored it above seq after (0: not
// stored), concurrently.
func (a *Appender) logFindAll(ctx context.Context, ps []*ledger.Prepared, seqs []uint64, after uint64) error {
	if len(ps) == 1 {
		if seqs[0] != 0 {
			return nil
		}
		var err error
		seqs[0], err = a.logFindRetry(ctx, ps[0], after)
		return err
	}
	sem := make(chan struct{}, lookupConcurrency)
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for i, p := range ps {
		if seqs[i] != 0 {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			seq, err := a.logFindRetry(ctx, p, after)
			if err != nil {
				errMu.Lock()
				first = cmp.Or(first, err)
				errMu.Unlock()
				return
			}
			seqs[i] = seq
		}()
	}
	wg.Wait()
	return first
}

// logFindRetry is logFind, tried again with the appends' backoff when it
// failed for a passing reason.
func (a *Appender) logFindRetry(ctx context.Context, p *ledger.Prepared, after uint64) (uint64, error) {
	seq, err := a.logFind(ctx, p, after)
	for n := 1; err != nil && IsTransient(err) && n <= a.opts.MaxRetries && ctx.Err() == nil; n++ {
		t := time.NewTimer(backoff(a.opts.RetryWait, n))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		seq, err = a.logFind(ctx, p, after)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: envelope %q: looking it up in the log above %d: %w", ErrLogLookup, p.Decoded.Env.ID, after, err)
	}
	return seq, nil
}

// logFind returns the sequence of the first message above seq after that
// holds p, read from the stream's own per-subject index: a retry of p is
// published on p's subject (the subject is a function of the envelope),
// so only the messages on that subject need reading. The last message on
// it is read first: none, or one at or below after (a new proposal, or a
// subject the Index already covers), and p is not stored above after, in
// one request. Otherwise the subject's messages above after are read in
// order (one request each) up to that last one.
func (a *Appender) logFind(ctx context.Context, p *ledger.Prepared, after uint64) (uint64, error) {
	st, err := a.streamHandle(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.AckTimeout)
	defer cancel()
	last, err := st.GetLastMsgForSubject(ctx, p.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case last.Sequence <= after:
		return 0, nil
	}
	for seq := after + 1; seq < last.Sequence; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(p.Subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if m.Sequence >= last.Sequence {
			break
		}
		if a.holds(m, p) {
			return m.Sequence, nil
		}
		seq = m.Sequence + 1
	}
	if a.holds(last, p) {
		return last.Sequence, nil
	}
	return 0, nil
}

// holds reports whether stored message m has p's subject and is an
// envelope with p's id and digest.
func (a *Appender) holds(m *jetstream.RawStreamMsg, p *ledger.Prepared) bool {
	if m.Subject != p.Subject {
		return false
	}
	d, err := ledger.Decode(m.Data, ledger.DecodeOptions{Now: a.opts.Now()})
	if err != nil {
		return false // undecodable bytes are not p
	}
	return d.Env.ID == p.Decoded.Env.ID && d.Digest == p.Decoded.Digest
}

// known looks p up (in the index, and in the log when the index is
// behind, as lookup does) and returns the sequence p was first stored at, verified against the
// stored message; 0 when it is not stored (or the message the index names
// is not p: then the stream decides). No index: 0.
func (a *Appender) known(ctx context.Context, p *ledger.Prepared) (uint64, error) {
	if a.opts.Index == nil {
		return 0, nil
	}
	ids := []ledger.Identity{p.Identity()}
	seqs := []uint64{0}
	if err := a.lookup(ctx, []*ledger.Prepared{p}, ids, seqs); err != nil {
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

// lookupFailedResult is the Result of an append not published because
// neither the index nor the log could tell whether it was stored (err
// wraps ErrLogLookup, or is the stream's error).
func lookupFailedResult(p *ledger.Prepared, err error) ledger.Result {
	return ledger.Result{ID: p.Decoded.Env.ID, Subject: p.Subject,
		Err: fmt.Errorf("%w: envelope %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, err)}
}
