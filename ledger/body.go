package ledger

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/subjects"
)

// BodyOptions says how a submit path takes a body (see
// PrepareBodyStandalone and the Appender's PrepareBody).
type BodyOptions struct {
	// Kernel takes the body as a bare kernel submission (a Proposal or
	// KernelRequest object) whatever it looks like, so that a malformed
	// one gets its V-PROP refusal rather than an envelope's (HTTP
	// ?kernel=1, the submit service's Ledger-Kernel header). Without it a
	// body is taken as bare when MaybeBareKernel recognises it.
	Kernel bool
	// Sender, when not empty, publishes the envelope under this sender's
	// subject token instead of its from (contract §14 history mode: a bridge
	// appends what a participant was received from, and the fold finds a
	// forged from invalid, spoofed_sender). LedgerSender is refused
	// (reserved_sender), as is a sender that is not 1..MaxIDBytes bytes of
	// UTF-8 without C0 control characters or DEL (bad_value); both with field
	// "from".
	Sender string
	// Bridge, when not empty, is a HeaderBridge value (a BridgeMark) kept
	// on the stored message: the envelope came through that bridge
	// session (contract §14). A value that does not parse is refused
	// (bad_value, field Ledger-Bridge).
	Bridge string
}

// PrepareBodyStandalone is the one validation of every submit path
// (HTTP, the submit service, the CLI through HTTP, the bridge), without
// an Appender: it takes a body as a client sent it and returns it ready
// to publish, in this order:
//
//  1. the sender check of o.Sender (when set);
//  2. dialect detection: a bare kernel submission (o.Kernel, or
//     MaybeBareKernel) is validated (ValidateKernel; refusal codes are the
//     V-PROP rule ids, fields relative to the bare object) and wrapped in
//     its kernel/proposal envelope (WrapKernel), now being V-PROP-010's
//     "now";
//  3. PrepareStandalone's checks (space, size, Decode, Submittable,
//     limits) on the envelope, which is decoded once: a wrapped
//     envelope's decoded form from step 2 is reused, and its kernel
//     payload is not validated again.
//
// space "" is DefaultSpace; zero fields of limits mean their defaults.
// The error is a *RefusalError. body is not copied (a wrapped envelope is
// a new slice). Appender.PrepareBody (package ledger/appendlog) calls it with
// the Appender's default space, limits and clock.
func PrepareBodyStandalone(space string, body []byte, o BodyOptions, limits SubmitLimits, now time.Time) (*Prepared, error) {
	if o.Sender != "" {
		if err := checkSender(o.Sender); err != nil {
			return nil, err
		}
	}
	if o.Bridge != "" {
		if _, err := ParseBridgeMark(o.Bridge); err != nil {
			return nil, err
		}
	}
	raw := body
	var d *Decoded
	if o.Kernel || MaybeBareKernel(body) {
		env, dk, err := wrapKernel(body, WrapOptions{Now: now})
		if err != nil {
			return nil, err
		}
		raw, d = env, dk
	}
	p, _, err := prepareDecoded(space, raw, limits, now, true, d)
	if err != nil {
		return nil, err
	}
	if o.Sender != "" {
		p.Subject = subjects.Event{Space: p.Space, Key: p.Decoded.Key, Type: string(p.Decoded.Type), Sender: o.Sender}.String()
	}
	p.Bridge = o.Bridge
	return p, nil
}

// checkSender refuses a BodyOptions.Sender that is the ledger's own or not
// an id.
func checkSender(sender string) error {
	if sender == LedgerSender {
		return &RefusalError{Code: api.CodeReservedSender, Field: "from",
			Message: fmt.Sprintf("sender %q is the ledger's own: no participant may publish as it", LedgerSender)}
	}
	if len(sender) > MaxIDBytes || !utf8.ValidString(sender) ||
		strings.ContainsFunc(sender, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return &RefusalError{Code: api.CodeBadValue, Field: "from",
			Message: fmt.Sprintf("sender %q is not 1..%d bytes of UTF-8 without control characters", sender, MaxIDBytes)}
	}
	return nil
}
