package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/subjects"
)

// A sequence missing from the stream above the checkpoint (a record the
// store lost before the projector folded it: a checksum that fails, a
// truncated or removed block) holds the projector (contract §16, "The log
// checks itself"): it neither stops nor skips the sequence (a fold that
// skipped it would depend on the damage), it keeps the projection at the
// last good sequence, says so (Held, Options.OnHold), and looks for the
// sequence again every Options.HoldPoll; once the stream answers it
// again (restored from a backup or an export) the projector resumes by
// itself.

// DefaultHoldPoll is Options.HoldPoll's default.
const DefaultHoldPoll = time.Second

// Hold is where a held projector stands.
type Hold struct {
	// Missing is the sequence the stream does not answer; the projection
	// is at Missing-1.
	Missing uint64
	// Reason says it in words.
	Reason string
}

// missingError ends a session that met a sequence the stream does not
// hold.
type missingError struct{ seq uint64 }

func (e *missingError) Error() string {
	return fmt.Sprintf("projector: seq %d is missing from stream %s (the projection is held at seq %d until it is restored)", e.seq, subjects.StreamName, e.seq-1)
}

// Held returns where the projector is held, false when it is not.
func (p *Projector) Held() (Hold, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		return Hold{}, false
	}
	return *p.held, true
}

func (p *Projector) setHeld(h *Hold) {
	p.mu.Lock()
	p.held = h
	p.mu.Unlock()
}

// missing reports whether seq is missing from the stream (a direct read
// finds nothing); err when that could not be told.
func (p *Projector) missing(ctx context.Context, seq uint64) (bool, error) {
	stream, err := p.js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return false, fmt.Errorf("projector: stream %s: %w", subjects.StreamName, err)
	}
	if _, err := stream.GetMsg(ctx, seq); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return true, nil
		}
		return false, fmt.Errorf("projector: read seq %d: %w", seq, err)
	}
	return false, nil
}

// hold holds the projector at the sequence before seq until the stream
// answers seq again (then it returns true: start a session) or ctx ends
// (false). OnHold is called on holding and at every look, and with nil
// once the sequence is back.
func (p *Projector) hold(ctx context.Context, seq uint64) bool {
	h := &Hold{Missing: seq, Reason: (&missingError{seq}).Error()}
	p.setHeld(h)
	p.log.Error().Uint64(logKeySeq, seq).Msg("sequence missing from the stream: the projection is held at the last good sequence until it is restored")
	defer p.setHeld(nil)
	for {
		if p.opts.OnHold != nil {
			c := *h
			p.opts.OnHold(&c)
		}
		t := time.NewTimer(p.opts.HoldPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		gone, err := p.missing(ctx, seq)
		switch {
		case ctx.Err() != nil:
			return false
		case err != nil:
			p.log.Warn().Err(err).Uint64(logKeySeq, seq).Msg("cannot look for the missing sequence now; still held")
		case !gone:
			p.log.Warn().Uint64(logKeySeq, seq).Msg("the missing sequence is back in the stream: the projection resumes")
			if p.opts.OnHold != nil {
				p.opts.OnHold(nil)
			}
			return true
		}
	}
}
