package ledger

import (
	"encoding/json"
)

// decodeKernel validates the payload of a kernel/proposal envelope with
// ValidateKernel — proposal_id (request_id) bound to the envelope id, actor
// bound to the envelope's from, now as V-PROP-010's current time (the stream
// timestamp when folding, the append time when submitting) — and sets
// d.Kernel, d.Method ("kernel/" + action_type) and d.Params (the
// parameters). The error is a *RefusalError whose Field is prefixed with
// "payload." ("payload.target.domain"). A payload opts.kernel holds
// already (see wrapKernel) is not validated again.
func decodeKernel(d *Decoded, payload json.RawMessage, opts DecodeOptions) error {
	k := opts.kernel
	if k == nil || k.ProposalID != d.Env.ID || k.Actor != d.Env.From {
		var r *RefusalError
		if k, r = validateKernel(payload, KernelOptions{Now: opts.Now, ID: d.Env.ID, From: d.Env.From}); r != nil {
			r.Field = payloadPath(r.Field)
			return r
		}
	}
	d.Kernel = k
	d.Method = k.Method()
	d.Params = k.Parameters
	return nil
}

// payloadPath turns a path relative to the payload into one relative to the
// envelope.
func payloadPath(field string) string {
	if field == "" {
		return "payload"
	}
	return "payload." + field
}
