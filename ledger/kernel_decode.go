package ledger

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"time"
)

// kernelFields are the top-level members of a typed kernel Proposal, taken
// from KernelProposal's json tags.
var kernelFields = func() map[string]bool {
	m := make(map[string]bool)
	t := reflect.TypeFor[KernelProposal]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			m[name] = true
		}
	}
	return m
}()

// decodeKernel decodes the payload of a kernel/proposal envelope into
// d.Kernel and sets d.Method ("kernel/" + action_type) and d.Params
// (payload.parameters, nil when absent). now is the "current time" of the
// semantic rules (V-PROP-010).
//
// This is the minimal version; the kernel task replaces it with the full
// V-PROP-001..006 and V-PROP-010..014 validation and the KernelRequest
// mapping. It checks: the payload is a Proposal with no unknown top-level
// member (bad_value, Field "payload.<member>"), members have the right JSON
// types (wrong_type), proposal_id is a non-empty string (V-PROP-001) equal
// to the envelope id (bad_value). The error is a *RefusalError.
func decodeKernel(d *Decoded, payload json.RawMessage, now time.Time) error {
	_ = now // used by V-PROP-010 in the full validation
	var members map[string]json.RawMessage
	if err := json.Unmarshal(payload, &members); err != nil {
		return refuse(CodeWrongType, "payload", "kernel proposal payload must be an object: %v", err)
	}
	var unknown []string
	for k := range members {
		if !kernelFields[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown) // deterministic: report the first in key order
		return refuse(CodeBadValue, "payload."+unknown[0], "%q is not a field of a kernel proposal", unknown[0])
	}
	var k KernelProposal
	if err := json.Unmarshal(payload, &k); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := "payload"
			if te.Field != "" {
				field += "." + te.Field
			}
			return refuse(CodeWrongType, field, "%s must be %s, not a JSON %s", field, jsonTypeName(te.Type), te.Value)
		}
		return refuse(CodeBadValue, "payload", "kernel proposal: %v", err)
	}
	if k.ProposalID == "" {
		return refuse("V-PROP-001", "payload.proposal_id", "proposal_id must be a non-empty string")
	}
	if k.ProposalID != d.Env.ID {
		return refuse(CodeBadValue, "payload.proposal_id", "payload.proposal_id %q must equal the envelope id %q", k.ProposalID, d.Env.ID)
	}
	d.Kernel = &k
	d.Method = "kernel/" + string(k.ActionType)
	if len(k.Parameters) > 0 && string(k.Parameters) != "null" {
		d.Params = k.Parameters
	}
	return nil
}

// jsonTypeName names a Go type the way a JSON author understands it.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	}
	return t.String()
}
