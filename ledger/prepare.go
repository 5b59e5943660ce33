package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/subjects"
)

const (
	// DefaultSpace is the space of envelopes submitted without one.
	DefaultSpace = "default"
	// MaxSpaceBytes bounds a space name (like ids, contract §2).
	MaxSpaceBytes = MaxIDBytes
)

// HeaderMsgIDClash is the header the ledger sets on a stored message that
// marks an envelope stored under a derived Nats-Msg-Id because other bytes
// were found stored under its own (contract §4, verified duplicates). Its
// value is the clashing Nats-Msg-Id. The fold flags msg_id_clash on it.
const HeaderMsgIDClash = "Ledger-Msg-Id-Clash"

// ErrPublish is wrapped by every error of an append that was accepted
// by Prepare but not acknowledged by the stream. The wrapped cause says
// why; when it is a timeout or a cancelled context the envelope may or
// may not have been stored, and appending the same bytes again is safe:
// within the stream's duplicate window always, and at any later time
// through an appender with an index of stored envelopes (the ledger's
// server: every append path), it is stored once.
var ErrPublish = errors.New("ledger: publish failed")

// Prepared is an envelope ready to publish: its decoded form, the space,
// subject and Nats-Msg-Id it is published with, and the original bytes,
// which are published untouched.
type Prepared struct {
	Decoded *Decoded
	Space   string
	Subject string
	MsgID   string
	Raw     []byte
	// Bridge is the HeaderBridge value the stored message carries ("":
	// none): the bridge session it came through (BodyOptions.Bridge).
	Bridge string
}

// Identity is what makes two envelopes the same envelope in the ledger
// (contract §4): the space, the envelope id and the digest of its canonical
// form. It is what a Nats-Msg-Id encodes (Decoded.MsgID), and what the
// append paths look up to answer a retry as a duplicate for ever.
type Identity struct {
	Space, ID, Digest string
}

// Identity returns p's identity.
func (p *Prepared) Identity() Identity {
	return Identity{Space: p.Space, ID: p.Decoded.Env.ID, Digest: p.Decoded.Digest}
}

// Result is the outcome of one append.
type Result struct {
	// ID is the envelope id ("" when a refused envelope could not be
	// decoded).
	ID string
	// Seq is the stream sequence of the stored envelope: its position in
	// the ledger. For a duplicate it is the sequence of the copy stored
	// first.
	Seq uint64
	// Duplicate says the envelope was not stored again because an
	// envelope with the same space, id and digest (Identity) was stored
	// before (contract §4): within the stream's duplicate window JetStream
	// says so; beyond it, the appender's index of stored envelopes (the
	// projection, when one is wired: jslog.AppenderOptions.Index) does.
	// Either answer is verified: the message at Seq is that envelope (same
	// subject, id and digest). When other bytes had been stored under the
	// envelope's Nats-Msg-Id, the envelope is stored anyway, flagged with
	// HeaderMsgIDClash, and Duplicate is false. After
	// a retry (Attempts > 1) that earlier copy may be this append's own
	// first attempt.
	Duplicate bool
	// Subject is the subject the envelope was (or would have been)
	// published to ("" when refused).
	Subject string
	// Attempts is the number of publish attempts (0 when refused).
	Attempts int
	// Err is nil on success, a *RefusalError (errors.Is ErrRefused) when
	// the envelope was refused before publishing, or an error wrapping
	// ErrPublish and naming the envelope id.
	Err error
}

// CheckSpace refuses a space that is empty, not UTF-8, over
// MaxSpaceBytes or "*" (every space, never a space name), with a
// *RefusalError (field "space"); nil otherwise.
func CheckSpace(space string) error {
	switch {
	case space == "":
		return &RefusalError{Code: api.CodeMissingField, Field: "space", Message: "space is empty"}
	case !utf8.ValidString(space):
		return &RefusalError{Code: api.CodeInvalidUTF8, Field: "space", Message: "space is not valid UTF-8"}
	case len(space) > MaxSpaceBytes:
		return &RefusalError{Code: api.CodeTooLong, Field: "space",
			Message: fmt.Sprintf("space is %d bytes, over the limit of %d", len(space), MaxSpaceBytes)}
	case space == "*":
		// "*" means every space where spaces are listed (the event
		// routes, the auth file): never a space of its own.
		return &RefusalError{Code: api.CodeBadValue, Field: "space", Message: `"*" is not a space name (it means every space)`}
	}
	return nil
}

// PrepareStandalone checks raw as every submit path must (contract §8) without
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
	p, _, err := PrepareEnvelope(space, raw, limits, now, true)
	return p, err
}

// PrepareEnvelope is PrepareStandalone when submit, or the check of an
// envelope the ledger writes itself (ledger/gap, ledger/expire) when
// !submit: no Submittable, but the envelope must still decode to a
// lifecycle type and pass the limits. On a refusal it also returns the
// envelope id when the envelope decoded ("" otherwise), for Result.ID.
// It is what the Appender's Prepare, PrepareSystem and Append* call.
func PrepareEnvelope(space string, raw []byte, limits SubmitLimits, now time.Time, submit bool) (*Prepared, string, error) {
	return prepareDecoded(space, raw, limits, now, submit, nil)
}

// prepareDecoded is prepare; d, when not nil, is raw decoded already (with
// now), which it does not decode again.
func prepareDecoded(space string, raw []byte, limits SubmitLimits, now time.Time, submit bool, d *Decoded) (*Prepared, string, error) {
	if space == "" {
		space = DefaultSpace
	}
	if err := CheckSpace(space); err != nil {
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
		return nil, d.Env.ID, &RefusalError{Code: api.CodeNotLifecycle, Field: "kind",
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
