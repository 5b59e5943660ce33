package ledger

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/mewledger/ledger/api"
)

// Every lifecycle form of the design records (contract §2, "Every lifecycle
// form in the design records"). The seeds weigh several ways to express a
// proposal's lifecycle besides the kinds of the dialect table; each is
// accepted in every dialect, classified into one of the canonical types and
// keeps its original kind (Decoded.OrigKind, and Env.Kind: the digest of
// such an event covers the kind it was sent as) and its form (Decoded.Form).

// Kinds of the seeds' lifecycle forms.
const (
	// KindMEUPLifecycle is ADR-v2c's generic lifecycle message: payload
	// operation withdraw/reject/status/... (options 2..6, 8).
	KindMEUPLifecycle = "meup.lifecycle"
	// KindProposalStatus is ADR-005 option 3: payload proposalId, status.
	KindProposalStatus = "proposal/status"
	// KindMCP is ADR-005 option 4: a bare MCP message; only its JSON-RPC
	// notifications/cancelled (params.requestId) is lifecycle.
	KindMCP = "mcp"
	// KindProposalResponse is the targeted-proposals decision's option 2:
	// payload proposal_id, status accept/reject/defer.
	KindProposalResponse = "proposal-response"
	// KindBid is the targeted-proposals decision's option 4: payload
	// proposal_id, confidence, estimated_time.
	KindBid = "bid"
	// KindBareProposal is the seeds' own spelling of a proposal (ADR-005,
	// the targeted-proposals decision): folded as mcp/proposal.
	KindBareProposal = "proposal"
)

// Forms (Decoded.Form) of the seeds' lifecycle forms; "" for the kinds of
// the dialect table. A meup.lifecycle form is "meup.lifecycle/<operation>"
// for the operations the seed names, "meup.lifecycle/other" otherwise (the
// operation as given is Note.Kind).
const (
	FormProposalStatus   = "proposal/status"
	FormMCPCancelled     = "mcp/notifications/cancelled"
	FormProposalResponse = "proposal-response"
	FormBid              = "bid"
	FormBareProposal     = "proposal"
	FormLifecyclePrefix  = "meup.lifecycle/"
)

// LifecycleOperations are the meup.lifecycle operations ADR-v2c names
// (options 2..6, 8). Others are kept as given, as notes.
var LifecycleOperations = []string{"withdraw", "reject", "status", "ack", "claim", "release", "bid", "award", "prepare", "commit", "abort"}

// Statuses are the status values of ADR-v2c option 8.
var Statuses = []string{"considering", "queued", "processing", "unable"}

// Note kinds (Note.Kind) besides the meup.lifecycle operations.
const (
	NoteStatus = "status"
	NoteAccept = "accept"
	NoteDefer  = "defer"
	NoteBid    = "bid"
)

// Note is what a lifecycle form folded as a note carries (contract §2): a
// participant's status, an acceptance or deferral, a bid, or any other
// meup.lifecycle operation. Kind is NoteStatus, NoteAccept, NoteDefer,
// NoteBid, or the operation (or proposal/status or proposal-response
// status) exactly as given; Status is the status value as given.
type Note struct {
	Kind   string
	Status string
	// Confidence and EstimatedTime are a bid's (nil when absent).
	Confidence    *float64
	EstimatedTime *float64
}

// TargetSource is one participant a proposal targets and the field that
// names it: "to", "fulfiller", "preferred", "preferred_participant",
// "preferred_fulfillers" or "targeting.preferred".
type TargetSource struct {
	ID     string
	Source string
}

// Targeting is a proposal's payload.targeting beyond its preferred list
// (the targeted-proposals decision, option 5). WindowMs is exclusive_timeout
// (or fallback_timeout when that is absent), 0 when neither is given.
// FallbackToBroadcast defaults to true.
type Targeting struct {
	Exclusive           bool
	WindowMs            int64
	FallbackToBroadcast bool
	QuickReject         bool
}

// liftCorrelation makes id (a payload member naming the proposal) the
// event's correlation, or checks it is among the one given.
func liftCorrelation(d *Decoded, id, field string) *RefusalError {
	if r := checkID(id, field, MaxIDBytes); r != nil {
		return r
	}
	if len(d.Env.CorrelationID) == 0 {
		d.Env.CorrelationID = []string{id}
		return nil
	}
	if !slices.Contains(d.Env.CorrelationID, id) {
		return refuse(api.CodeBadValue, field, "%s %q is not among %s %q", field, id, corrField(d.Dialect), d.Env.CorrelationID)
	}
	return nil
}

// optString reads an optional string member of pl at path.
func optString(pl fields, name, path string) (string, bool, *RefusalError) {
	return pl.str(name, path)
}

// classifyForm classifies the seeds' lifecycle forms; handled is false for
// any other kind.
func classifyForm(d *Decoded, pl fields) (handled bool, r *RefusalError) {
	env := &d.Env
	switch env.Kind {
	case KindMEUPLifecycle:
		return true, classifyMEUPLifecycle(d, pl)
	case KindProposalStatus:
		d.Form = FormProposalStatus
		if pl == nil {
			return true, refuse(api.CodeMissingField, "payload", "a proposal/status requires a payload with proposalId and status")
		}
		if pid, ok, r := optString(pl, "proposalId", "payload.proposalId"); r != nil {
			return true, r
		} else if ok && pid != "" {
			if r := liftCorrelation(d, pid, "payload.proposalId"); r != nil {
				return true, r
			}
		}
		status, ok, r := optString(pl, "status", "payload.status")
		if r != nil {
			return true, r
		}
		if !ok || status == "" {
			return true, refuse(api.CodeMissingField, "payload.status", "a proposal/status requires payload.status")
		}
		if r := reason(d, pl); r != nil {
			return true, r
		}
		if status == "withdrawn" {
			d.Type = TypeWithdraw
		} else {
			d.Type = TypeNote
			d.Note = &Note{Kind: NoteStatus, Status: status}
		}
	case KindMCP:
		if pl == nil {
			return false, nil
		}
		m, _, r := pl.str("method", "payload.method")
		if r != nil {
			return true, r
		}
		if m != "notifications/cancelled" {
			return false, nil // any other MCP message is not lifecycle
		}
		d.Form = FormMCPCancelled
		params, ok := pl.get("params")
		if !ok || params[0] != '{' {
			return true, refuse(api.CodeMissingField, "payload.params", "notifications/cancelled requires payload.params with requestId")
		}
		pp := splitObject(params)
		rid, ok := pp.get("requestId")
		if !ok {
			return true, refuse(api.CodeMissingField, "payload.params.requestId", "notifications/cancelled requires payload.params.requestId, the proposal id")
		}
		var id string
		switch rid[0] {
		case '"':
			id = decodeString(rid)
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			id = string(rid) // JSON-RPC ids may be numbers
		default:
			return true, refuse(api.CodeWrongType, "payload.params.requestId", "payload.params.requestId must be a string or a number, not %s", jsonKind(rid))
		}
		if r := liftCorrelation(d, id, "payload.params.requestId"); r != nil {
			return true, r
		}
		s, _, r := pp.str("reason", "payload.params.reason")
		if r != nil {
			return true, r
		}
		d.Type, d.Reason = TypeWithdraw, s
	case KindProposalResponse:
		d.Form = FormProposalResponse
		if r := proposalIDMember(d, pl, KindProposalResponse); r != nil {
			return true, r
		}
		status, ok, r := optString(pl, "status", "payload.status")
		if r != nil {
			return true, r
		}
		if !ok || status == "" {
			return true, refuse(api.CodeMissingField, "payload.status", "a proposal-response requires payload.status (accept, reject or defer)")
		}
		if r := reason(d, pl); r != nil {
			return true, r
		}
		if status == "reject" {
			d.Type = TypeReject
		} else {
			d.Type = TypeNote
			d.Note = &Note{Kind: status, Status: status}
		}
	case KindBid:
		d.Form = FormBid
		if r := proposalIDMember(d, pl, KindBid); r != nil {
			return true, r
		}
		n := &Note{Kind: NoteBid}
		for _, m := range []struct {
			name string
			dst  **float64
		}{{"confidence", &n.Confidence}, {"estimated_time", &n.EstimatedTime}} {
			v, ok := pl.get(m.name)
			if !ok {
				continue
			}
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil || v[0] == '"' {
				return true, refuse(api.CodeWrongType, "payload."+m.name, "payload.%s must be a number, not %s", m.name, jsonKind(v))
			}
			*m.dst = &f
		}
		d.Type, d.Note = TypeNote, n
	default:
		return false, nil
	}
	if len(env.CorrelationID) == 0 {
		return true, refuse(api.CodeMissingCorrelation, corrField(d.Dialect), "kind %q requires %s (or its payload's proposal id) naming the proposal", d.OrigKind, corrField(d.Dialect))
	}
	d.Targets = slices.Clone(env.CorrelationID)
	if d.Type == TypeNote {
		d.Targets = d.Targets[:1]
	}
	return true, nil
}

// proposalIDMember lifts payload.proposal_id (proposal-response, bid).
func proposalIDMember(d *Decoded, pl fields, kind string) *RefusalError {
	if pl == nil {
		return refuse(api.CodeMissingField, "payload", "a %s requires a payload with proposal_id", kind)
	}
	pid, ok, r := optString(pl, "proposal_id", "payload.proposal_id")
	if r != nil {
		return r
	}
	if ok && pid != "" {
		return liftCorrelation(d, pid, "payload.proposal_id")
	}
	return nil
}

func classifyMEUPLifecycle(d *Decoded, pl fields) *RefusalError {
	if pl == nil {
		return refuse(api.CodeMissingField, "payload", "a meup.lifecycle requires a payload with an operation")
	}
	op, ok, r := optString(pl, "operation", "payload.operation")
	if r != nil {
		return r
	}
	if !ok || op == "" {
		return refuse(api.CodeMissingField, "payload.operation", "a meup.lifecycle requires payload.operation (withdraw, reject, status, ...)")
	}
	if _, _, r := optString(pl, "target", "payload.target"); r != nil {
		return r
	}
	if r := reason(d, pl); r != nil {
		return r
	}
	d.Form = FormLifecyclePrefix + op
	if !slices.Contains(LifecycleOperations, op) {
		d.Form = FormLifecyclePrefix + "other"
	}
	switch op {
	case "withdraw":
		d.Type = TypeWithdraw
	case "reject":
		d.Type = TypeReject
	case "status":
		status, _, r := optString(pl, "status", "payload.status")
		if r != nil {
			return r
		}
		d.Type, d.Note = TypeNote, &Note{Kind: NoteStatus, Status: status}
	default:
		st, _, r := optString(pl, "status", "payload.status")
		if r != nil {
			return r
		}
		d.Type, d.Note = TypeNote, &Note{Kind: op, Status: st}
	}
	if len(d.Env.CorrelationID) == 0 {
		cf := corrField(d.Dialect)
		return refuse(api.CodeMissingCorrelation, cf, "a meup.lifecycle %s requires %s naming the proposal", op, cf)
	}
	d.Targets = slices.Clone(d.Env.CorrelationID)
	if d.Type == TypeNote {
		d.Targets = d.Targets[:1]
	}
	return nil
}

// Target sources (TargetSource.Source).
const (
	SourceTo                   = "to"
	SourceFulfiller            = "fulfiller"
	SourcePreferred            = "preferred"
	SourcePreferredParticipant = "preferred_participant"
	SourcePreferredFulfillers  = "preferred_fulfillers"
	SourceTargetingPreferred   = "targeting.preferred"
)

// proposalForms reads what the seeds add to a proposal's payload: ttl (ms,
// as ttl_ms), the targeting fields and payload.targeting.
func proposalForms(d *Decoded, pl fields) *RefusalError {
	if d.TTLms == 0 {
		if v, ok := pl.get("ttl"); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n <= 0 || n > MaxTTLms {
				return refuse(api.CodeBadValue, "payload.ttl", "payload.ttl must be a positive integer number of milliseconds, at most %d (one year), not %s", MaxTTLms, truncate(string(v), 40))
			}
			d.TTLms = n
		}
	}
	for _, t := range d.Env.To {
		d.TargetSources = append(d.TargetSources, TargetSource{ID: t, Source: SourceTo})
	}
	addList := func(v json.RawMessage, path, source string) *RefusalError {
		ids, r := idList(v, path, true, true)
		if r != nil {
			return r
		}
		for _, id := range ids {
			d.TargetSources = append(d.TargetSources, TargetSource{ID: id, Source: source})
		}
		return nil
	}
	for _, src := range []string{SourceFulfiller, SourcePreferred, SourcePreferredParticipant, SourcePreferredFulfillers} {
		if v, ok := pl.get(src); ok {
			if r := addList(v, "payload."+src, src); r != nil {
				return r
			}
		}
	}
	v, ok := pl.get("targeting")
	if !ok {
		return nil
	}
	if v[0] != '{' {
		return refuse(api.CodeWrongType, "payload.targeting", "payload.targeting must be an object, not %s", jsonKind(v))
	}
	tg := splitObject(v)
	if pv, ok := tg.get("preferred"); ok {
		if r := addList(pv, "payload.targeting.preferred", SourceTargetingPreferred); r != nil {
			return r
		}
	}
	t := &Targeting{FallbackToBroadcast: true}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"exclusive", &t.Exclusive}, {"fallback_to_broadcast", &t.FallbackToBroadcast}, {"quick_reject", &t.QuickReject}} {
		bv, ok := tg.get(b.name)
		if !ok {
			continue
		}
		switch string(bv) {
		case "true":
			*b.dst = true
		case "false":
			*b.dst = false
		default:
			return refuse(api.CodeWrongType, "payload.targeting."+b.name, "payload.targeting.%s must be a boolean, not %s", b.name, jsonKind(bv))
		}
	}
	for _, name := range []string{"exclusive_timeout", "fallback_timeout"} {
		tv, ok := tg.get(name)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(tv), 10, 64)
		if err != nil || n < 0 || n > MaxTTLms {
			return refuse(api.CodeBadValue, "payload.targeting."+name, "payload.targeting.%s must be a non-negative integer number of milliseconds, at most %d, not %s", name, MaxTTLms, truncate(string(tv), 40))
		}
		if t.WindowMs == 0 {
			t.WindowMs = n
		}
	}
	d.Targeting = t
	return nil
}
