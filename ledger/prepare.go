package ledger

import (
	"bytes"
	"fmt"
	"time"

	"github.com/mewledger/ledger/subjects"
)

// PrepareStandalone checks raw as every submit path must (SPEC §8) without
// an Appender, and returns what a plain NATS client publishes it with. It
// is what Appender.Prepare does, with the limits and the clock given:
//
//   - space "" is DefaultSpace; a space that is empty, not UTF-8 or over
//     MaxSpaceBytes is refused (field "space");
//   - the size limit first (before spending a decode on an oversize body),
//     then Decode (now is the "current time" of kernel rule V-PROP-010),
//     Submittable (no ignored kinds, no ledger/expire), and the to and
//     correlation_id limits;
//   - the subject ledger.<space>.<key>.<type>.<from> and the Nats-Msg-Id
//     <space>/<id>/<digest>.
//
// Zero fields of limits mean their defaults. The error is a *RefusalError.
// raw is not copied. `ledger subject` prints the result.
func PrepareStandalone(space string, raw []byte, limits SubmitLimits, now time.Time) (*Prepared, error) {
	p, _, err := prepare(space, raw, limits, now, true)
	return p, err
}

// prepare is PrepareStandalone, or AppendSystem's check when !submit (the
// envelope must still decode to a lifecycle type). On a refusal it also
// returns the envelope id when the envelope decoded.
func prepare(space string, raw []byte, limits SubmitLimits, now time.Time, submit bool) (*Prepared, string, error) {
	return prepareDecoded(space, raw, limits, now, submit, nil)
}

// prepareDecoded is prepare; d, when not nil, is raw decoded already (with
// now), which it does not decode again.
func prepareDecoded(space string, raw []byte, limits SubmitLimits, now time.Time, submit bool, d *Decoded) (*Prepared, string, error) {
	if space == "" {
		space = DefaultSpace
	}
	if err := checkSpace(space); err != nil {
		return nil, "", err
	}
	if err := limits.Check(raw, nil); err != nil {
		return nil, "", err
	}
	if d == nil {
		var r *RefusalError
		if d, r = decode(raw, DecodeOptions{Now: now}); r != nil {
			return nil, "", r
		}
	}
	if submit {
		if err := Submittable(d); err != nil {
			return nil, d.Env.ID, err
		}
	} else if !d.Type.Valid() {
		return nil, d.Env.ID, &RefusalError{Code: CodeNotLifecycle, Field: "kind",
			Message: fmt.Sprintf("kind %q is not part of the proposal lifecycle", d.OrigKind)}
	}
	if err := limits.Check(raw, d); err != nil {
		return nil, d.Env.ID, err
	}
	return &Prepared{
		Decoded: d,
		Space:   space,
		Subject: subjects.Event{Space: space, Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String(),
		MsgID:   d.MsgID(space),
		Raw:     raw,
	}, d.Env.ID, nil
}

// PrepareSystem is Prepare for an envelope the ledger writes itself
// (ledger/gap, ledger/expire): AppendSystem's checks, without Submittable
// (it must still decode to a lifecycle type and pass the limits). Hand
// the result to Submit. The error is a *RefusalError.
func (a *Appender) PrepareSystem(space string, raw []byte) (*Prepared, error) {
	p, _, err := a.prepare(space, raw, false)
	return p, err
}

// Now returns the Appender's clock: the time of an append, which is the
// "current time" of kernel rule V-PROP-010 at submit time.
func (a *Appender) Now() time.Time { return a.opts.Now() }

// Limits returns the Appender's submit limits, defaults filled in.
func (a *Appender) Limits() SubmitLimits {
	l, def := a.opts.Limits, DefaultSubmitLimits()
	if l.MaxBytes <= 0 {
		l.MaxBytes = def.MaxBytes
	}
	if l.MaxTo <= 0 {
		l.MaxTo = def.MaxTo
	}
	if l.MaxCorrelation <= 0 {
		l.MaxCorrelation = def.MaxCorrelation
	}
	return l
}

// MaybeBareKernel reports whether a body sent to a submit path is a bare
// kernel submission rather than an envelope: IsBareKernel (a JSON object
// without protocol and with proposal_id or request_id), tried only when
// the body names one of those members at all, so that envelopes pay for
// no second parse.
func MaybeBareKernel(raw []byte) bool {
	if !bytes.Contains(raw, []byte("proposal_id")) && !bytes.Contains(raw, []byte("request_id")) {
		return false
	}
	return IsBareKernel(raw)
}
