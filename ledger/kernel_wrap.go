package ledger

import (
	"bytes"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
)

// WrapOptions are the inputs of WrapKernel besides the bare object.
type WrapOptions struct {
	// Now is the "current time" of V-PROP-010: the time of the append. A
	// zero Now refuses any proposal with a time_window (fail closed).
	Now time.Time
	// Sender, when not empty, is the authenticated identity of the
	// submitter; the proposal's actor must equal it (V-PROP-003).
	Sender string
}

// WrapKernel wraps a bare kernel submission — a Proposal object, or an older
// KernelRequest object — into the mew/v0.4 kernel/proposal envelope the
// ledger stores:
//
//	{"protocol":"mew/v0.4","id":<proposal_id>,"from":<actor>,"kind":"kernel/proposal","payload":<bare>}
//
// id is the proposal_id (a KernelRequest's request_id), from is the actor,
// and payload is the bare object's bytes untouched (only whitespace around
// the object is dropped). There is no ts (the ledger's time is the stream
// timestamp) and no to, so the output depends only on bare: the same bare
// object always gives the same envelope, digest and Nats-Msg-Id.
//
// It refuses, fail-closed, whatever ValidateKernel refuses (RefusalError
// Code the V-PROP rule id), with Field relative to the bare object
// ("target.domain", not "payload.target.domain"), and checks that the
// envelope decodes (Decode with opts.Now), so an envelope WrapKernel returns
// is accepted by the append paths at that time. The submit paths reach it
// through PrepareBodyStandalone, which also reuses the decoded envelope;
// on its own:
//
//	env, err := ledger.WrapKernel(body, ledger.WrapOptions{Now: time.Now()})
func WrapKernel(bare []byte, opts WrapOptions) ([]byte, error) {
	env, _, err := wrapKernel(bare, opts)
	return env, err
}

// wrapKernel is WrapKernel, also returning the envelope decoded. The
// payload is validated once: the envelope's Decode reuses the typed view
// (DecodeOptions.kernel), so PrepareBodyStandalone decodes a bare
// submission once in all.
func wrapKernel(bare []byte, opts WrapOptions) ([]byte, *Decoded, error) {
	b := bytes.TrimSpace(bare)
	if len(b) > MaxEnvelopeBytes {
		return nil, nil, refuse(api.CodeOversize, "", "the kernel proposal is %d bytes, over the envelope limit of %d", len(b), MaxEnvelopeBytes)
	}
	k, r := validateKernel(b, KernelOptions{Now: opts.Now, From: opts.Sender})
	if r != nil {
		return nil, nil, r
	}
	env := make([]byte, 0, len(b)+len(k.ProposalID)+len(k.Actor)+96)
	env = append(env, `{"protocol":`...)
	env = canon.AppendString(env, []byte(DialectMEW04))
	env = append(env, `,"id":`...)
	env = canon.AppendString(env, []byte(k.ProposalID))
	env = append(env, `,"from":`...)
	env = canon.AppendString(env, []byte(k.Actor))
	env = append(env, `,"kind":`...)
	env = canon.AppendString(env, []byte(KindKernelProposal))
	env = append(env, `,"payload":`...)
	env = append(env, b...)
	env = append(env, '}')
	d, r := decode(env, DecodeOptions{Now: opts.Now, kernel: k})
	if r != nil {
		rr := *r
		rr.Field = barePath(rr.Field)
		return nil, nil, &rr
	}
	return env, d, nil
}

// barePath turns an envelope path into one relative to the bare object
// (which is the envelope's payload); envelope-level paths become "".
func barePath(field string) string {
	if f, ok := strings.CutPrefix(field, "payload."); ok {
		return f
	}
	return ""
}
