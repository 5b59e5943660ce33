package bridge

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/mewledger/ledger/ledger"
)

// Results of one frame (the result label of ledger_bridge_envelopes_total).
const (
	ResultAppended  = "appended"  // stored by the ledger
	ResultDuplicate = "duplicate" // the ledger had it already (a retry, a replay)
	ResultRefused   = "refused"   // the ledger refused it (logged with its code)
	ResultFailed    = "failed"    // the ledger did not acknowledge it (logged)
	ResultSkipped   = "skipped"   // not part of the lifecycle: counted, not sent
	ResultDropped   = "dropped"   // the backlog was full: not sent (inside a recorded gap)
	ResultReserved  = "reserved"  // claims to be the ledger's own (from "ledger", id expire:/gap:, its kinds): not sent, logged
)

// Kind labels of frames that are not an envelope with a kind.
const (
	KindStream   = "#stream#" // a stream data frame "#<id>#<data>"
	KindNotJSON  = "not_json" // a frame that is not a JSON object
	KindNoKind   = "no_kind"  // a JSON object without a string kind
	KindOther    = "other"    // any kind not listed in knownKinds
	kindSystem   = "system/*"
	kindCapabil  = "capability/*"
	maxPlainReqs = 4096
)

// knownKinds are the kinds counted under their own name; every other kind
// is counted as system/*, capability/* or other, so that a client cannot
// grow the metric's label set.
var knownKinds = map[string]bool{
	"mcp/proposal": true, "mcp/withdraw": true, "mcp/reject": true, "mcp/request": true,
	"mcp/response": true, "mcp/notification": true, "chat": true, "kernel/proposal": true,
	"kernel/approve": true, "system/welcome": true, "system/presence": true, "system/error": true,
	"capability/grant": true, "capability/grant-ack": true, "capability/revoke": true,
	"participant/status": true, "reasoning/start": true, "reasoning/thought": true,
	"reasoning/conclusion": true, "stream/request": true, "stream/open": true, "stream/close": true,
	"mcp.proposal": true, "mcp.withdraw": true, "mcp.reject": true, "mcp.request": true, "mcp.response": true,
	"ledger/expire": true, ledger.KindGap: true,
}

// KindLabel returns the metric label of a kind: the kind itself when it is
// a known MEW kind, else system/*, capability/* or other.
func KindLabel(kind string) string {
	switch {
	case knownKinds[kind]:
		return kind
	case strings.HasPrefix(kind, "system/"):
		return kindSystem
	case strings.HasPrefix(kind, "capability/"):
		return kindCapabil
	case strings.HasPrefix(kind, "mcp/proposal:"), strings.HasPrefix(kind, "mcp/request:"):
		return kind[:strings.IndexByte(kind, ':')]
	}
	return KindOther
}

// Verdict is what the bridge does with one frame.
type Verdict struct {
	// Kind is the metric label of the frame (KindLabel of its kind, or
	// KindStream, KindNotJSON, KindNoKind).
	Kind string
	// ID is the envelope id ("" when the frame has none), From its from.
	ID   string
	From string
	// Append is true for a lifecycle envelope the bridge sends to the
	// ledger (and for an envelope that looks like one but does not decode:
	// the ledger refuses it with its specific code, and the bridge counts
	// and logs the refusal).
	Append bool
	// Skip says why a frame is not sent (when !Append).
	Skip string
}

// Skip reasons.
const (
	SkipStream        = "stream data frame"
	SkipEcho          = "a recorder's echo check (its own message through the gateway)"
	SkipNotEnvelope   = "not a JSON envelope"
	SkipSystem        = "gateway system or capability message"
	SkipNotLifecycle  = "not part of the proposal lifecycle"
	SkipPlainResponse = "response to a plain request (not a fulfilment)"
	SkipPlainThread   = "chat correlated only to messages outside every proposal's life"
	SkipReserved      = "claims to be written by the ledger (its kinds, ids beginning expire: or gap:, or from \"ledger\")"
)

// Filter classifies the frames of one recorded space (contract §14): lifecycle
// envelopes are appended, everything else is skipped. It remembers the ids
// of the last plain messages it skipped (at most 4096): plain mcp/requests,
// plain chats, and chats threaded under them, so that their responses and
// the chats correlated only to them, which would stay orphans in the
// ledger for ever, are skipped too. A Filter is not safe for concurrent
// use; one bridge owns one.
type Filter struct {
	now   func() time.Time
	plain map[string]struct{}
	order []string // FIFO of plain, oldest first
}

// NewFilter returns a Filter; now is the clock of kernel rule V-PROP-010
// (nil: time.Now).
func NewFilter(now func() time.Time) *Filter {
	if now == nil {
		now = time.Now
	}
	return &Filter{now: now, plain: map[string]struct{}{}}
}

// lightEnvelope is what Classify reads of a frame that does not decode.
type lightEnvelope struct {
	ID   json.RawMessage `json:"id"`
	Kind json.RawMessage `json:"kind"`
}

// Classify decides what to do with one WebSocket text frame (or one
// envelope of the gateway's history file). It never fails and never
// panics, whatever the bytes.
func (f *Filter) Classify(frame []byte) Verdict {
	if len(frame) > 0 && frame[0] == '#' {
		return Verdict{Kind: KindStream, Skip: SkipStream}
	}
	if id, ok := isEcho(frame); ok {
		return Verdict{Kind: KindEcho, ID: id, Skip: SkipEcho}
	}
	d, err := ledger.Decode(frame, ledger.DecodeOptions{Now: f.now()})
	if err != nil {
		return f.undecodable(frame)
	}
	v := Verdict{Kind: KindLabel(d.OrigKind), ID: d.Env.ID, From: d.Env.From}
	switch {
	case d.Type == ledger.TypeIgnored:
		if strings.HasPrefix(d.Env.Kind, "system/") || strings.HasPrefix(d.Env.Kind, "capability/") {
			v.Skip = SkipSystem
			return v
		}
		if d.Env.Kind == ledger.KindRequest || d.Env.Kind == ledger.KindChat {
			f.rememberPlain(d.Env.ID)
		}
		v.Skip = SkipNotLifecycle
		return v
	case ledger.Submittable(d) != nil:
		// ledger/expire, ledger/gap: written by the ledger only.
		v.Skip = SkipReserved
		return v
	case d.Type == ledger.TypeResponse && len(d.Targets) > 0 && f.isPlain(d.Targets[0]):
		v.Skip = SkipPlainResponse
		return v
	case d.Type == ledger.TypeNote && d.Env.Kind == ledger.KindChat && len(d.Targets) > 0 && f.allPlain(d.Targets):
		f.rememberPlain(d.Env.ID) // a reply to it is as plain
		v.Skip = SkipPlainThread
		return v
	}
	// A lifecycle envelope reusing the id of a plain request: responses
	// naming that id from now on may answer it.
	f.forgetPlain(d.Env.ID)
	v.Append = true
	return v
}

// undecodable classifies a frame the ledger would refuse: gateway error
// frames and other non-envelopes are skipped; anything else that names a
// kind is sent, so that the ledger's refusal (with its code) is logged.
func (f *Filter) undecodable(frame []byte) Verdict {
	var le lightEnvelope
	if err := json.Unmarshal(frame, &le); err != nil {
		return Verdict{Kind: KindNotJSON, Skip: SkipNotEnvelope}
	}
	var kind, id string
	if json.Unmarshal(le.Kind, &kind) != nil || kind == "" {
		return Verdict{Kind: KindNoKind, Skip: SkipNotEnvelope}
	}
	_ = json.Unmarshal(le.ID, &id)
	v := Verdict{Kind: KindLabel(kind), ID: id}
	if strings.HasPrefix(kind, "system/") || strings.HasPrefix(kind, "capability/") {
		v.Skip = SkipSystem
		return v
	}
	v.Append = true
	return v
}

func (f *Filter) rememberPlain(id string) {
	if _, ok := f.plain[id]; ok {
		return
	}
	if len(f.order) >= maxPlainReqs {
		delete(f.plain, f.order[0])
		f.order = f.order[1:]
	}
	f.plain[id] = struct{}{}
	f.order = append(f.order, id)
}

func (f *Filter) isPlain(id string) bool {
	_, ok := f.plain[id]
	return ok
}

func (f *Filter) allPlain(ids []string) bool {
	for _, id := range ids {
		if !f.isPlain(id) {
			return false
		}
	}
	return true
}

func (f *Filter) forgetPlain(id string) {
	delete(f.plain, id) // its slot in order ages out
}
