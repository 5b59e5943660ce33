package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
)

// Protocol limits used by Decode. They are fixed (not configuration) so that
// folding the same log always gives the same answer.
const (
	// MaxEnvelopeBytes is the largest envelope Decode accepts (contract §8).
	MaxEnvelopeBytes = 1 << 20 // 1 MiB
	// MaxIDBytes bounds id, from, every to entry and every correlation id
	// (contract §2: 1..256 bytes of UTF-8).
	MaxIDBytes = 256
	// MaxExpireIDBytes bounds the id of a ledger/expire envelope, which is
	// "expire:<space>/<proposal id>" and so may be longer than MaxIDBytes.
	MaxExpireIDBytes = len("expire:/") + 2*MaxIDBytes
	// MaxGapIDBytes bounds the id of a ledger/gap envelope, which is
	// "gap:<bridge>/<unix nanoseconds>/<32 hex digits>" (see GapID; logs
	// written before hold "gap:<bridge>/<unix nanoseconds>").
	MaxGapIDBytes = len("gap://") + MaxIDBytes + 32 + 32
	// MaxTTLms is the largest payload.ttl_ms of a proposal: one year.
	MaxTTLms int64 = 365 * 24 * 60 * 60 * 1000
)

// DecodeOptions are the inputs of Decode besides the bytes.
type DecodeOptions struct {
	// Now is the "current time" for kernel rule V-PROP-010: the append time
	// on submit paths, the stream timestamp when folding. Nothing in Decode
	// reads the wall clock.
	Now time.Time

	// kernel is the typed view of a kernel/proposal payload validated
	// already, from the same bytes and Now (wrapKernel builds the
	// envelope around the payload it validated): decodeKernel uses it
	// instead of validating the payload a second time, when its
	// proposal_id and actor are the envelope's id and from.
	kernel *KernelProposal
}

// Decode validates one envelope in any accepted dialect (contract §2), normalises
// it to the canonical MEW v0.4 form, classifies it (contract §3) and derives
// everything the fold and the append paths need (see [Decoded]).
//
// It is pure: the same bytes and options always give the same result, and
// it never panics. The error, when not nil, is always a *RefusalError whose
// Code is one of the Code* constants (or a kernel rule id) and whose Field
// is the JSON path of the offending field.
//
// Checks run in this order, and the first failure is reported: size
// (oversize), UTF-8 (invalid_utf8), JSON syntax, object, depth and duplicate
// keys at any level (not_json; a \u escape of an unpaired surrogate is
// invalid_utf8), protocol, id, from, kind, to, ts, context, correlation,
// payload, then the kind's own payload rules.
//
// Decisions beyond the contract, so that the canonical form is exact:
//   - null for an optional field (to, ts, context, correlation, payload and
//     optional payload members) means absent; null for a required one is
//     missing_field.
//   - Control characters (Unicode Cc, including U+0000) are refused
//     (bad_value) in id, from, to entries and correlation ids; they are
//     allowed in the payload.
//   - Duplicate keys are refused at every depth, not only at the top: an
//     evidence store must not pick one silently.
//   - Unknown top-level members are allowed and ignored: they stay in the
//     stored original bytes but are not part of the normalised envelope or
//     its digest.
//   - Env.Protocol is always "mew/v0.4" (the canonical form); the dialect
//     as sent is in Decoded.Dialect.
//   - An mcpx proposal or request whose method is only in its kind suffix
//     gets "method" added to Env.Payload, so the normalised envelope is a
//     complete MEW v0.4 envelope that decodes again to the same event.
func Decode(raw []byte, opts DecodeOptions) (*Decoded, error) {
	d, r := decode(raw, opts)
	if r != nil {
		return nil, r
	}
	return d, nil
}

// Submittable refuses what only the fold accepts: TypeIgnored (code
// not_lifecycle, or missing_correlation for an mcp/request or chat without
// correlation_id), TypeExpire and TypeGap (code reserved_kind: only the
// ledger writes ledger/expire and ledger/gap), an id beginning with one of
// ReservedIDPrefixes (reserved_id) and the sender LedgerSender
// (reserved_sender). It returns nil for everything else. The system append
// path (appendlog.Appender.AppendSystem) does not call it.
func Submittable(d *Decoded) error {
	switch d.Type {
	case TypeIgnored:
		switch d.Env.Kind {
		case KindRequest:
			return refuse(api.CodeMissingCorrelation, corrField(d.Dialect),
				"an %s without correlation_id is not part of a proposal's lifecycle: set correlation_id to the proposal it fulfils", d.OrigKind)
		case KindChat:
			return refuse(api.CodeMissingCorrelation, corrField(d.Dialect),
				"a chat without correlation_id is not part of a proposal's lifecycle: set correlation_id to the proposal, rejection or withdrawal it explains")
		}
		return refuse(api.CodeNotLifecycle, "kind",
			"kind %q is not part of the proposal lifecycle (accepted: proposal, withdraw, reject, request, response, chat, kernel/proposal, kernel/approve, and the design records' forms meup.lifecycle, proposal/status, proposal-response, bid, mcp notifications/cancelled)", d.OrigKind)
	case TypeExpire, TypeGap:
		return refuse(api.CodeReservedKind, "kind", "kind %q is written only by the ledger itself", d.OrigKind)
	}
	for _, prefix := range ReservedIDPrefixes {
		if strings.HasPrefix(d.Env.ID, prefix) {
			return refuse(api.CodeReservedID, "id", "ids beginning %q are reserved for events the ledger writes itself", prefix)
		}
	}
	if d.Env.From == LedgerSender {
		return refuse(api.CodeReservedSender, "from", "from %q is reserved for events the ledger writes itself", LedgerSender)
	}
	return nil
}

// ReservedIDPrefixes are the id prefixes of the events the ledger writes
// itself (ExpireID, GapID): the submit paths refuse them (reserved_id), and
// the fold refuses them on anything but the ledger's own events.
var ReservedIDPrefixes = []string{"expire:", "gap:"}

// SubmitLimits are the configurable limits of the submit paths (HTTP, submit
// service, CLI). A zero or negative field means its default.
type SubmitLimits struct {
	// MaxBytes is the largest envelope accepted (default 1 MiB; Decode
	// refuses anything over MaxEnvelopeBytes whatever this says).
	MaxBytes int
	// MaxTo is the most to entries accepted (default 64).
	MaxTo int
	// MaxCorrelation is the most correlation ids accepted (default 64).
	MaxCorrelation int
}

// DefaultSubmitLimits returns the default limits: 1 MiB, 64 to entries, 64
// correlation ids.
func DefaultSubmitLimits() SubmitLimits {
	return SubmitLimits{MaxBytes: MaxEnvelopeBytes, MaxTo: 64, MaxCorrelation: 64}
}

// WithDefaults returns l with each limit that is zero or negative set to
// its DefaultSubmitLimits value.
func (l SubmitLimits) WithDefaults() SubmitLimits {
	def := DefaultSubmitLimits()
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

// Check applies the limits to an envelope's raw size and, when d is not nil,
// to its decoded to and correlation_id lists. It returns a *RefusalError
// with code oversize, or too_many with Field "to" or "correlation_id".
func (l SubmitLimits) Check(raw []byte, d *Decoded) error {
	l = l.WithDefaults()
	if len(raw) > l.MaxBytes {
		return refuse(api.CodeOversize, "", "envelope is %d bytes, over the limit of %d", len(raw), l.MaxBytes)
	}
	if d == nil {
		return nil
	}
	if len(d.Env.To) > l.MaxTo {
		return refuse(api.CodeTooMany, "to", "to has %d entries, over the limit of %d", len(d.Env.To), l.MaxTo)
	}
	if len(d.Env.CorrelationID) > l.MaxCorrelation {
		return refuse(api.CodeTooMany, "correlation_id", "correlation_id has %d entries, over the limit of %d", len(d.Env.CorrelationID), l.MaxCorrelation)
	}
	return nil
}

// ExpireID returns the deterministic id of the expiry event of a proposal:
// "expire:<space>/<proposal id>".
func ExpireID(space, proposalID string) string {
	return "expire:" + space + "/" + proposalID
}

// ExpireEnvelope returns the raw mew/v0.4 envelope the ledger appends when a
// proposal's deadline passes:
//
//	{"protocol":"mew/v0.4","id":"expire:<space>/<id>","from":"ledger","kind":"ledger/expire","correlation_id":["<id>"],"payload":{"deadline":"<RFC3339Nano UTC>"}}
//
// The bytes depend only on the arguments (no ts), so several ledger
// processes write the same event. It decodes to TypeExpire targeting
// proposalID when space and proposalID are valid ids (1..MaxIDBytes bytes).
func ExpireEnvelope(space, proposalID string, deadline time.Time) []byte {
	b := make([]byte, 0, 160+len(space)+2*len(proposalID))
	b = append(b, `{"protocol":`...)
	b = canon.AppendString(b, []byte(DialectMEW04))
	b = append(b, `,"id":`...)
	b = canon.AppendString(b, []byte(ExpireID(space, proposalID)))
	b = append(b, `,"from":`...)
	b = canon.AppendString(b, []byte(LedgerSender))
	b = append(b, `,"kind":`...)
	b = canon.AppendString(b, []byte(KindExpire))
	b = append(b, `,"correlation_id":[`...)
	b = canon.AppendString(b, []byte(proposalID))
	b = append(b, `],"payload":{"deadline":`...)
	b = canon.AppendString(b, []byte(deadline.UTC().Format(time.RFC3339Nano)))
	return append(b, "}}"...)
}

// Field names of the two correlation spellings.
const (
	fieldCorrelationID    = "correlation_id"
	fieldCorrelationIDOld = "correlationId"
)

// corrField is the correlation field name of a dialect.
func corrField(dialect string) string {
	if dialect == DialectMEUP01 {
		return fieldCorrelationIDOld
	}
	return fieldCorrelationID
}

// get returns a member, treating null as absent.
func (f fields) get(name string) (json.RawMessage, bool) {
	v, ok := f.member(name)
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func jsonKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// str returns an optional string member (present=false when absent/null).
func (f fields) str(name, path string) (s string, present bool, r *RefusalError) {
	v, ok := f.get(name)
	if !ok {
		return "", false, nil
	}
	if v[0] != '"' {
		return "", false, refuse(api.CodeWrongType, path, "%s must be a string, not %s", path, jsonKind(v))
	}
	if s, ok := knownValue(v[1 : len(v)-1]); ok {
		return s, true, nil
	}
	return decodeString(v), true, nil
}

// required returns a required non-empty string member.
func (f fields) required(name string) (string, *RefusalError) {
	s, ok, r := f.str(name, name)
	if r != nil {
		return "", r
	}
	if !ok || s == "" {
		return "", refuse(api.CodeMissingField, name, "%s is required and must be a non-empty string", name)
	}
	return s, nil
}

// checkID checks an id-like value (id, from, to entry, correlation id).
func checkID(s, path string, max int) *RefusalError {
	if s == "" {
		return refuse(api.CodeBadValue, path, "%s must not be empty", path)
	}
	if len(s) > max {
		return refuse(api.CodeTooLong, path, "%s is %d bytes, over the limit of %d", path, len(s), max)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return refuse(api.CodeBadValue, path, "%s contains the control character U+%04X at byte %d", path, r, i)
		}
	}
	return nil
}

// idList parses a string or an array of strings (string allowed only when
// allowString) into a list of valid ids, de-duplicated in order when dedup
// is set.
func idList(v json.RawMessage, path string, allowString, dedup bool) ([]string, *RefusalError) {
	var list []string
	switch v[0] {
	case '"':
		if !allowString {
			return nil, refuse(api.CodeWrongType, path, "%s must be an array of strings, not a string", path)
		}
		s := decodeString(v)
		list = []string{s}
		if r := checkID(s, path, MaxIDBytes); r != nil {
			return nil, r
		}
		return list, nil
	case '[':
		var buf [8]json.RawMessage
		items := splitArrayInto(buf[:0], v)
		list = make([]string, 0, len(items))
		for i, it := range items {
			// The item's path is built only for a refusal (it was one
			// allocation per item of every envelope's list).
			if len(it) == 0 || it[0] != '"' {
				ip := path + "[" + strconv.Itoa(i) + "]"
				return nil, refuse(api.CodeWrongType, ip, "%s must be a string, not %s", ip, jsonKind(it))
			}
			s := decodeString(it)
			if r := checkID(s, path, MaxIDBytes); r != nil {
				return nil, checkID(s, path+"["+strconv.Itoa(i)+"]", MaxIDBytes)
			}
			if !dedup || !slices.Contains(list, s) {
				list = append(list, s)
			}
		}
		return list, nil
	default:
		what := "an array of strings"
		if allowString {
			what = "a string or an array of strings"
		}
		return nil, refuse(api.CodeWrongType, path, "%s must be %s, not %s", path, what, jsonKind(v))
	}
}

// Kinds by spelling, used to normalise and to detect another dialect's form.
var (
	slashKinds = map[string]string{
		"mcp/proposal": KindProposal, "mcp/withdraw": KindWithdraw, "mcp/reject": KindReject,
		"mcp/request": KindRequest, "mcp/response": KindResponse, "chat": KindChat,
	}
	dotKinds = map[string]string{
		"mcp.proposal": KindProposal, "mcp.withdraw": KindWithdraw, "mcp.reject": KindReject,
		"mcp.request": KindRequest, "mcp.response": KindResponse, "chat": KindChat,
	}
	mcpxKinds = map[string]string{
		"proposal/withdraw": KindWithdraw, "proposal-reject": KindReject, "chat": KindChat,
	}
	// mcpxSuffixed are the mcpx kinds that take ":METHOD[:CTX]".
	mcpxSuffixed = map[string]string{
		"mcp/proposal": KindProposal, "mcp/request": KindRequest, "mcp/response": KindResponse,
	}
	commonKinds = map[string]string{
		KindKernelProposal: KindKernelProposal, KindKernelApprove: KindKernelApprove, KindExpire: KindExpire,
		KindGap: KindGap,
	}
)

// isMCPXForm reports whether kind is spelled the mcpx way.
func isMCPXForm(kind string) bool {
	if _, ok := mcpxKinds[kind]; ok && kind != "chat" {
		return true
	}
	if base, _, ok := strings.Cut(kind, ":"); ok {
		_, ok := mcpxSuffixed[base]
		return ok
	}
	return false
}

// kindInfo is the normalised kind plus what an mcpx suffix carried.
type kindInfo struct {
	kind   string // canonical kind, or the kind as sent when not a lifecycle kind
	method string // mcpx METHOD
	ctx    string // mcpx CTX
}

func normKind(dialect, kind string) (kindInfo, *RefusalError) {
	if k, ok := commonKinds[kind]; ok {
		return kindInfo{kind: k}, nil
	}
	mismatch := func(form string) *RefusalError {
		return refuse(api.CodeDialectMismatch, "kind", "kind %q is the %s spelling, not valid under protocol %s", kind, form, dialect)
	}
	switch dialect {
	case DialectMEUP01:
		if k, ok := dotKinds[kind]; ok {
			return kindInfo{kind: k}, nil
		}
		if _, ok := slashKinds[kind]; ok {
			return kindInfo{}, mismatch("MEW")
		}
		if isMCPXForm(kind) {
			return kindInfo{}, mismatch("mcpx")
		}
	case DialectMCPX01:
		if k, ok := mcpxKinds[kind]; ok {
			return kindInfo{kind: k}, nil
		}
		base, rest, hasSuffix := strings.Cut(kind, ":")
		if k, ok := mcpxSuffixed[base]; ok {
			ki := kindInfo{kind: k}
			if hasSuffix {
				var hasCtx bool
				ki.method, ki.ctx, hasCtx = strings.Cut(rest, ":")
				if ki.method == "" {
					return kindInfo{}, refuse(api.CodeBadValue, "kind", "kind %q has an empty METHOD after ':'", kind)
				}
				if hasCtx && ki.ctx == "" {
					return kindInfo{}, refuse(api.CodeBadValue, "kind", "kind %q has an empty context after the method", kind)
				}
			}
			return ki, nil
		}
		if _, ok := dotKinds[kind]; ok {
			return kindInfo{}, mismatch("MEUP v0.1")
		}
		if _, ok := slashKinds[kind]; ok {
			return kindInfo{}, mismatch("MEW")
		}
	default: // the MEW dialects
		if k, ok := slashKinds[kind]; ok {
			return kindInfo{kind: k}, nil
		}
		if _, ok := dotKinds[kind]; ok {
			return kindInfo{}, mismatch("MEUP v0.1")
		}
		if isMCPXForm(kind) {
			return kindInfo{}, mismatch("mcpx")
		}
	}
	return kindInfo{kind: kind}, nil
}

// refusalFromCanon maps a canon error to a refusal.
func refusalFromCanon(err error) *RefusalError {
	var ce *canon.Error
	if !errors.As(err, &ce) {
		return refuse(api.CodeNotJSON, "", "not valid JSON: %v", err)
	}
	switch {
	case errors.Is(err, canon.ErrEncoding):
		return refuse(api.CodeInvalidUTF8, ce.Path, "%s at byte %d", ce.Msg, ce.Offset)
	case errors.Is(err, canon.ErrDuplicateKey):
		return refuse(api.CodeNotJSON, ce.Path, "%s at byte %d: an envelope must not repeat a key", ce.Msg, ce.Offset)
	default:
		return refuse(api.CodeNotJSON, ce.Path, "not valid JSON: %s at byte %d", ce.Msg, ce.Offset)
	}
}

func decode(raw []byte, opts DecodeOptions) (*Decoded, *RefusalError) {
	if testOnlyOnDecode != nil {
		testOnlyOnDecode()
	}
	if len(raw) > MaxEnvelopeBytes {
		return nil, refuse(api.CodeOversize, "", "envelope is %d bytes, over the limit of %d", len(raw), MaxEnvelopeBytes)
	}
	if !utf8.Valid(raw) {
		return nil, refuse(api.CodeInvalidUTF8, "", "envelope is not valid UTF-8")
	}
	// The canonical form is only looked at here (it never outlives the
	// call), so its buffer is recycled.
	cbuf := canonBufs.Get().(*[]byte)
	defer func() {
		if cap(*cbuf) <= maxPooledCanon {
			canonBufs.Put(cbuf)
		}
	}()
	c, err := canon.Append((*cbuf)[:0], raw)
	*cbuf = c[:0]
	if err != nil {
		return nil, refusalFromCanon(err)
	}
	if c[0] != '{' {
		return nil, refuse(api.CodeNotJSON, "", "envelope must be a JSON object, not %s", jsonKind(c))
	}
	// canon accepted raw: the light scanner splits it (see jsonscan.go).
	var topBuf, plBuf [16]jsonMember // envelopes have a handful of members
	top := splitObjectInto(topBuf[:0], raw[scanWS(raw, 0):])

	d := &Decoded{}
	env := &d.Env
	proto, r := decodeProtocol(d, top)
	if r != nil {
		return nil, r
	}
	ki, r := decodeIdentity(d, top, proto)
	if r != nil {
		return nil, r
	}
	if r := decodeHeader(env, top, ki); r != nil {
		return nil, r
	}
	if r := decodeCorrelation(env, top, proto); r != nil {
		return nil, r
	}

	// payload
	var pl fields
	var sent json.RawMessage // the payload as sent
	if v, ok := top.get("payload"); ok {
		sent = v
		if v[0] != '{' {
			return nil, refuse(api.CodeWrongType, "payload", "payload must be an object, not %s", jsonKind(v))
		}
		env.Payload = v
		pl = splitObjectInto(plBuf[:0], v)
	}

	if r := classify(d, ki, pl, opts); r != nil {
		return nil, r
	}
	d.Key = eventKey(d)
	d.Digest = digest(env, canonicalPayload(env, sent, c))
	return d, nil
}

// eventKey is the key an event is filed under: a proposal's own id, a
// gap's bridge, else the first id of its correlation, else its own id.
func eventKey(d *Decoded) string {
	env := &d.Env
	switch {
	case d.Type == TypeProposal:
		return env.ID
	case d.Type == TypeGap:
		return d.Gap.Bridge
	case len(env.CorrelationID) > 0:
		return env.CorrelationID[0]
	default:
		return env.ID
	}
}

// canonicalPayload is the canonical form of env.Payload: the payload
// member of c, the envelope's canonical form (canon's form of a value is
// the same inside the envelope as alone), unless the payload is no longer
// the one sent (the mcpx method was added to it). nil without a payload.
func canonicalPayload(env *Envelope, sent json.RawMessage, c []byte) []byte {
	if len(env.Payload) == 0 {
		return nil
	}
	rebuilt := len(env.Payload) != len(sent) || &env.Payload[0] != &sent[0]
	if v, ok := findMember(c, "payload"); ok && !rebuilt {
		return v
	}
	cp, err := canon.Canonical(env.Payload)
	if err != nil {
		return nil // unreachable: the payload is valid JSON
	}
	return cp
}

// decodeProtocol reads the protocol member (one of Dialects) into
// d.Dialect; the envelope is rewritten to DialectMEW04.
func decodeProtocol(d *Decoded, top fields) (string, *RefusalError) {
	proto, ok, r := top.str("protocol", "protocol")
	if r != nil {
		return "", r
	}
	if !ok || proto == "" {
		return "", refuse(api.CodeMissingField, "protocol", "protocol is required (one of %s)", strings.Join(Dialects, ", "))
	}
	if !slices.Contains(Dialects, proto) {
		return "", refuse(api.CodeUnknownProtocol, "protocol", "protocol %q is not accepted (accepted: %s)", proto, strings.Join(Dialects, ", "))
	}
	d.Dialect = proto
	d.Env.Protocol = DialectMEW04
	return proto, nil
}

// decodeIdentity reads id, from and kind (normalised for the dialect)
// and checks the ids' limits (longer for the ledger's own expiries and
// gaps).
func decodeIdentity(d *Decoded, top fields, proto string) (kindInfo, *RefusalError) {
	env := &d.Env
	var r *RefusalError
	if env.ID, r = top.required("id"); r != nil {
		return kindInfo{}, r
	}
	if env.From, r = top.required("from"); r != nil {
		return kindInfo{}, r
	}
	if d.OrigKind, r = top.required("kind"); r != nil {
		return kindInfo{}, r
	}
	ki, r := normKind(proto, d.OrigKind)
	if r != nil {
		return kindInfo{}, r
	}
	env.Kind = ki.kind
	idMax := MaxIDBytes
	switch env.Kind {
	case KindExpire:
		idMax = MaxExpireIDBytes
	case KindGap:
		idMax = MaxGapIDBytes
	}
	if r := checkID(env.ID, "id", idMax); r != nil {
		return kindInfo{}, r
	}
	if r := checkID(env.From, "from", MaxIDBytes); r != nil {
		return kindInfo{}, r
	}
	return ki, nil
}

// decodeHeader reads to (absent or [] is broadcast), ts (RFC 3339) and
// context (the kind's default when absent).
func decodeHeader(env *Envelope, top fields, ki kindInfo) *RefusalError {
	if v, ok := top.get("to"); ok {
		var r *RefusalError
		if env.To, r = idList(v, "to", false, false); r != nil {
			return r
		}
		if len(env.To) == 0 {
			env.To = nil // [] and absent both mean broadcast
		}
	}
	if ts, ok, r := top.str("ts", "ts"); r != nil {
		return r
	} else if ok {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			return refuse(api.CodeBadValue, "ts", "ts %q is not an RFC 3339 time", ts)
		}
		env.TS = ts
	}
	if cx, ok, r := top.str("context", "context"); r != nil {
		return r
	} else if ok {
		env.Context = cx
	}
	if env.Context == "" {
		env.Context = ki.ctx
	}
	return nil
}

// decodeCorrelation reads the dialect's correlation member; the other
// dialect's spelling is refused.
func decodeCorrelation(env *Envelope, top fields, proto string) *RefusalError {
	native, foreign := fieldCorrelationID, fieldCorrelationIDOld
	if proto == DialectMEUP01 {
		native, foreign = foreign, native
	}
	if _, ok := top.get(foreign); ok {
		if _, both := top.get(native); both {
			return refuse(api.CodeDialectMismatch, foreign, "both correlation_id and correlationId are set; protocol %s uses %s", proto, native)
		}
		return refuse(api.CodeDialectMismatch, foreign, "%s is not a field of protocol %s; it uses %s", foreign, proto, native)
	}
	if v, ok := top.get(native); ok {
		var r *RefusalError
		if env.CorrelationID, r = idList(v, native, true, true); r != nil {
			return r
		}
		if len(env.CorrelationID) == 0 {
			env.CorrelationID = nil
		}
	}
	return nil
}

// digestBufs recycles digest's buffers.
var digestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// canonBufs recycles decode's buffers for the canonical form.
var canonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledCanon bounds the buffers kept in canonBufs.
const maxPooledCanon = 64 << 10

// digest returns the hex SHA-256 of the canonical JSON of env without its
// ts and protocol (the identity of an event across dialects and retries):
// exactly canon.Canonical(json.Marshal(env with TS and Protocol "")), which
// is what it was first computed as, built directly. canonPayload is the
// canonical form of env.Payload. The members in canonical (byte) order:
// context, correlation_id, from, id, kind, payload, protocol (always
// present: it has no omitempty, so it is ""), to; the omitempty ones only
// when not empty.
func digest(env *Envelope, canonPayload []byte) string {
	n := 64 + len(env.Context) + len(env.From) + len(env.ID) + len(env.Kind) + len(canonPayload)
	for _, s := range env.CorrelationID {
		n += len(s) + 4
	}
	for _, s := range env.To {
		n += len(s) + 4
	}
	bp := digestBufs.Get().(*[]byte)
	b := slices.Grow((*bp)[:0], n+32)
	defer func() {
		if cap(b) <= maxPooledCanon {
			*bp = b[:0]
			digestBufs.Put(bp)
		}
	}()
	b = append(b, '{')
	if env.Context != "" {
		b = append(b, `"context":`...)
		b = canon.AppendString(b, env.Context)
		b = append(b, ',')
	}
	if len(env.CorrelationID) > 0 {
		b = append(b, `"correlation_id":`...)
		b = appendJSONStrings(b, env.CorrelationID)
		b = append(b, ',')
	}
	b = append(b, `"from":`...)
	b = canon.AppendString(b, env.From)
	b = append(b, `,"id":`...)
	b = canon.AppendString(b, env.ID)
	b = append(b, `,"kind":`...)
	b = canon.AppendString(b, env.Kind)
	if len(env.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, canonPayload...)
	}
	b = append(b, `,"protocol":""`...)
	if len(env.To) > 0 {
		b = append(b, `,"to":`...)
		b = appendJSONStrings(b, env.To)
	}
	b = append(b, '}')
	sum := sha256.Sum256(b)
	var h [2 * sha256.Size]byte // one allocation (the string), not two
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// appendJSONStrings appends ss as a canonical JSON array of strings.
func appendJSONStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = canon.AppendString(b, s)
	}
	return append(b, ']')
}

// classify sets Type, Targets and the payload-derived fields: one
// function a kind (classifyForm for the seeds' lifecycle forms).
func classify(d *Decoded, ki kindInfo, pl fields, opts DecodeOptions) *RefusalError {
	if d.Env.Kind == KindBareProposal {
		d.Env.Kind, d.Form = KindProposal, FormBareProposal
	}
	switch d.Env.Kind {
	case KindProposal:
		return classifyProposal(d, ki, pl)
	case KindKernelProposal:
		return classifyKernelProposal(d, opts)
	case KindWithdraw, KindReject:
		return classifyWithdrawOrReject(d, pl)
	case KindKernelApprove:
		return classifyApprove(d, pl)
	case KindRequest:
		return classifyRequest(d, ki, pl)
	case KindResponse:
		return classifyResponse(d, pl)
	case KindChat:
		return classifyChat(d, pl)
	case KindExpire:
		return classifyExpire(d, pl)
	case KindGap:
		return classifyGap(d, pl)
	default:
		if handled, r := classifyForm(d, pl); handled {
			return r
		}
		d.Type = TypeIgnored
		return nil
	}
}

// needCorrelation refuses an envelope whose kind requires a correlation
// (naming what it refers to) and that has none.
func needCorrelation(d *Decoded) *RefusalError {
	if len(d.Env.CorrelationID) == 0 {
		cf := corrField(d.Dialect)
		return refuse(api.CodeMissingCorrelation, cf, "kind %q requires %s naming what it refers to", d.OrigKind, cf)
	}
	return nil
}

// classifyProposal: a proposal needs a payload with a method; ttl_ms, if
// present, is a positive number of milliseconds up to MaxTTLms.
func classifyProposal(d *Decoded, ki kindInfo, pl fields) *RefusalError {
	d.Type = TypeProposal
	if pl == nil {
		return refuse(api.CodeMissingField, "payload", "a proposal requires a payload object with a method")
	}
	if r := methodParams(d, ki, pl, true); r != nil {
		return r
	}
	if v, ok := pl.get("ttl_ms"); ok {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 || n > MaxTTLms {
			return refuse(api.CodeBadValue, "payload.ttl_ms", "payload.ttl_ms must be a positive integer number of milliseconds, at most %d (one year), not %s", MaxTTLms, truncate(string(v), 40))
		}
		d.TTLms = n
	}
	return proposalForms(d, pl)
}

// classifyKernelProposal: the payload is the typed kernel Proposal,
// validated by decodeKernel.
func classifyKernelProposal(d *Decoded, opts DecodeOptions) *RefusalError {
	d.Type = TypeProposal
	if d.Env.Payload == nil {
		return refuse(api.CodeMissingField, "payload", "a kernel/proposal requires a payload object (the typed Proposal)")
	}
	if err := decodeKernel(d, d.Env.Payload, opts); err != nil {
		if r, ok := AsRefusal(err); ok {
			return r
		}
		return refuse(api.CodeBadValue, "payload", "%v", err)
	}
	return nil
}

// classifyWithdrawOrReject: a withdrawal or rejection targets every
// proposal its correlation names (an mcpx/0.1 payload's proposal id
// counts as one), with an optional reason.
func classifyWithdrawOrReject(d *Decoded, pl fields) *RefusalError {
	d.Type = TypeWithdraw
	if d.Env.Kind == KindReject {
		d.Type = TypeReject
	}
	if d.Dialect == DialectMCPX01 && pl != nil {
		if r := mcpxProposalID(d, pl); r != nil {
			return r
		}
	}
	if r := needCorrelation(d); r != nil {
		return r
	}
	d.Targets = slices.Clone(d.Env.CorrelationID)
	return reason(d, pl)
}

// mcpxProposalID reads the proposal id an mcpx/0.1 withdrawal
// (payload.proposalId) or rejection (payload.proposal_id) carries: it is
// the correlation when there is none, and must be among it otherwise.
func mcpxProposalID(d *Decoded, pl fields) *RefusalError {
	name := "proposalId"
	if d.Env.Kind == KindReject {
		name = "proposal_id"
	}
	pid, ok, r := pl.str(name, "payload."+name)
	if r != nil {
		return r
	}
	if !ok || pid == "" {
		return nil
	}
	if r := checkID(pid, "payload."+name, MaxIDBytes); r != nil {
		return r
	}
	corr := d.Env.CorrelationID
	if len(corr) == 0 {
		d.Env.CorrelationID = []string{pid}
	} else if !slices.Contains(corr, pid) {
		return refuse(api.CodeBadValue, "payload."+name, "payload.%s %q is not among correlation_id %q", name, pid, corr)
	}
	return nil
}

// classifyApprove: a kernel approval targets every proposal its
// correlation names, with an optional reason.
func classifyApprove(d *Decoded, pl fields) *RefusalError {
	d.Type = TypeApprove
	if r := needCorrelation(d); r != nil {
		return r
	}
	d.Targets = slices.Clone(d.Env.CorrelationID)
	return reason(d, pl)
}

// classifyRequest: a request correlated to a proposal fulfils it; an
// uncorrelated one is not the ledger's business.
func classifyRequest(d *Decoded, ki kindInfo, pl fields) *RefusalError {
	corr := d.Env.CorrelationID
	if len(corr) == 0 {
		d.Type = TypeIgnored
		return nil
	}
	d.Type = TypeFulfil
	d.Targets = []string{corr[0]}
	return methodParams(d, ki, pl, false)
}

// classifyResponse: a response to a fulfilment, with its outcome: failed
// for an error or an MCP tool result with isError true, else succeeded
// when it has a result.
func classifyResponse(d *Decoded, pl fields) *RefusalError {
	d.Type = TypeResponse
	if r := needCorrelation(d); r != nil {
		return r
	}
	d.Targets = []string{d.Env.CorrelationID[0]}
	if v, ok := pl.get("error"); ok && len(v) > 0 {
		d.Outcome = "failed"
	} else if v, ok := pl.member("result"); ok {
		d.Outcome = "succeeded"
		// An MCP tool failure is a result with isError: true.
		if len(v) > 0 && v[0] == '{' {
			if e, ok := findMember(v, "isError"); ok && string(e) == "true" {
				d.Outcome = "failed"
			}
		}
	}
	return nil
}

// classifyChat: a chat message correlated to a proposal is a note on it
// (payload.text, or payload.message); an uncorrelated one is ignored.
func classifyChat(d *Decoded, pl fields) *RefusalError {
	corr := d.Env.CorrelationID
	if len(corr) == 0 {
		d.Type = TypeIgnored
		return nil
	}
	d.Type = TypeNote
	d.Targets = []string{corr[0]}
	text, ok, r := pl.str("text", "payload.text")
	if r != nil {
		return r
	}
	if !ok {
		if text, _, r = pl.str("message", "payload.message"); r != nil {
			return r
		}
	}
	d.Text = text
	return nil
}

// classifyExpire: the ledger's expiry of a proposal, with an optional RFC
// 3339 deadline.
func classifyExpire(d *Decoded, pl fields) *RefusalError {
	d.Type = TypeExpire
	if r := needCorrelation(d); r != nil {
		return r
	}
	d.Targets = []string{d.Env.CorrelationID[0]}
	if dl, ok, r := pl.str("deadline", "payload.deadline"); r != nil {
		return r
	} else if ok {
		if _, err := time.Parse(time.RFC3339, dl); err != nil {
			return refuse(api.CodeBadValue, "payload.deadline", "payload.deadline %q is not an RFC 3339 time", dl)
		}
	}
	return nil
}

// classifyGap: a bridge's recording gap (decodeGap).
func classifyGap(d *Decoded, pl fields) *RefusalError {
	d.Type = TypeGap
	if pl == nil {
		return refuse(api.CodeMissingField, "payload", "a ledger/gap requires a payload object with bridge and disconnected_at")
	}
	g, r := decodeGap(pl)
	if r != nil {
		return r
	}
	d.Gap = g
	return nil
}

// decodeGap reads the payload of a ledger/gap envelope (see Gap): bridge
// (required, an id) and disconnected_at (required, RFC 3339) are checked;
// the other members are optional strings, reconnected_at an RFC 3339 time.
func decodeGap(pl fields) (*Gap, *RefusalError) {
	g := &Gap{}
	var ok bool
	var r *RefusalError
	if g.Bridge, ok, r = pl.str("bridge", "payload.bridge"); r != nil {
		return nil, r
	} else if !ok || g.Bridge == "" {
		return nil, refuse(api.CodeMissingField, "payload.bridge", "a ledger/gap requires payload.bridge, the bridge's participant name")
	}
	if r := checkID(g.Bridge, "payload.bridge", MaxIDBytes); r != nil {
		return nil, r
	}
	times := []struct {
		name     string
		dst      *time.Time
		required bool
	}{{"disconnected_at", &g.DisconnectedAt, true}, {"reconnected_at", &g.ReconnectedAt, false}, {"noticed_at", &g.NoticedAt, false}}
	for _, t := range times {
		s, ok, r := pl.str(t.name, "payload."+t.name)
		if r != nil {
			return nil, r
		}
		if !ok || s == "" {
			if t.required {
				return nil, refuse(api.CodeMissingField, "payload."+t.name, "a ledger/gap requires payload.%s (RFC 3339)", t.name)
			}
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, refuse(api.CodeBadValue, "payload."+t.name, "payload.%s %q is not an RFC 3339 time", t.name, truncate(s, 40))
		}
		*t.dst = v.UTC()
	}
	for _, m := range []struct {
		name string
		dst  *string
	}{{"mew_space", &g.MEWSpace}, {"gateway", &g.Gateway}, {"last_envelope", &g.LastEnvelope}, {"reason", &g.Reason}, {"session", &g.Session}} {
		if *m.dst, _, r = pl.str(m.name, "payload."+m.name); r != nil {
			return nil, r
		}
	}
	var n uint64
	if n, r = pl.count("last_seq", "payload.last_seq"); r != nil {
		return nil, r
	}
	g.LastSeq = n
	if n, r = pl.count("dropped", "payload.dropped"); r != nil {
		return nil, r
	}
	if n > 1<<31 {
		return nil, refuse(api.CodeBadValue, "payload.dropped", "payload.dropped %d is over %d", n, 1<<31)
	}
	g.Dropped = int(n)
	return g, nil
}

// count returns an optional non-negative integer member (0 when absent
// or null).
func (f fields) count(name, path string) (uint64, *RefusalError) {
	v, ok := f.get(name)
	if !ok || v[0] == 'n' {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, refuse(api.CodeWrongType, path, "%s must be a non-negative integer, not %s", path, truncate(string(v), 40))
	}
	return n, nil
}

// methodParams sets Method and Params of a proposal (required=true) or a
// fulfilment from payload.method / payload.params and the mcpx kind suffix.
// When the method is only in the suffix it is added to Env.Payload.
func methodParams(d *Decoded, ki kindInfo, pl fields, required bool) *RefusalError {
	m, ok, r := pl.str("method", "payload.method")
	if r != nil {
		return r
	}
	switch {
	case ok && m != "" && ki.method != "" && m != ki.method:
		return refuse(api.CodeBadValue, "payload.method", "payload.method %q differs from the method %q in kind %q", m, ki.method, d.OrigKind)
	case (!ok || m == "") && ki.method != "":
		m = ki.method
		d.Env.Payload = withMethod(pl.without("method"), m) // "method": "" or null is replaced
	case (!ok || m == "") && required:
		return refuse(api.CodeMissingField, "payload.method", "a proposal's payload.method is required and must be a non-empty string")
	}
	d.Method = m
	if v, ok := pl.get("params"); ok {
		d.Params = v
	}
	return nil
}

// withMethod returns the canonical JSON of the payload members plus method.
func withMethod(pl fields, method string) json.RawMessage {
	ms := append(slices.Clone(pl), jsonMember{name: "method"})
	slices.SortFunc(ms, func(x, y jsonMember) int { return strings.Compare(x.name, y.name) })
	b := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = canon.AppendString(b, []byte(m.name))
		b = append(b, ':')
		if m.name == "method" {
			b = canon.AppendString(b, []byte(method))
			continue
		}
		var err error
		if b, err = canon.Append(b, m.val); err != nil {
			// Unreachable: the payload was validated by canon already.
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// reason sets Reason from payload.reason (optional string, kept as given).
func reason(d *Decoded, pl fields) *RefusalError {
	s, _, r := pl.str("reason", "payload.reason")
	if r != nil {
		return r
	}
	d.Reason = s
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
