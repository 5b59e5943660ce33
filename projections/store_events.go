package projections

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/canon"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// The event index (contract §7 GET /v1/events).
//
// One record per stored message, keyed by its stream sequence, and
// secondary keys per filter value, all written in the fold's Pebble batch
// (a pure function of the log: a rebuild writes the same keys, and verify
// compares them):
//
//	'L' seq(8 B BE)                      → EventRecord, binary (encode_bin.go)
//	'J' field(1 B) esc(value) seq(8 B BE) → "" : the events whose field has value, in stream order
//	'Q' field(1 B) esc(value) block(8 B BE) → the block's sequences whose field has value (store_postings.go)
//	'K' nanos(8 B, sign-flipped) seq(8 B BE) → "" : stream time → sequence
//
// Fields of 'J' and 'Q' (one byte each; 'J' holds from, proposal and id,
// 'Q' the others): 's' space, 'e' effect (one key per
// distinct effect of the event's history entries), 't' type, 'k' kind,
// 'f' form, 'w' from (the sender), 'p' proposal (one key per id its history
// entries are filed under), 'n' anomaly (one per anomaly it raised), 'o'
// tool (params.name), 'r' reason (its own reason code), 'c' code (the
// fold's refusal code), 'i' event id. Empty values are not indexed.
//
// The record is made when the event arrives (fold.EventRecorder: time,
// space, subject key, digest, method, tool and main argument) and completed
// by every history entry the fold writes or deletes for its sequence (an
// orphan's entry is replaced when it is released, in a later batch). Its
// summary fields (effect, proposals, anomalies, code, detail) are derived
// from those entries. A filtered page is a seek-driven intersection (zigzag
// join) of the 'J' and 'Q' lists of its filters, bounded by the sequence range the
// time filters map to through 'K'; only the page's records are read.
// Its tags ('L', 'J', 'K', 'Q') are in store_keys.go with the others.

// Event index fields ('J' keys).
const (
	evSpace    = 's'
	evEffect   = 'e'
	evType     = 't'
	evKind     = 'k'
	evForm     = 'f'
	evFrom     = 'w'
	evProposal = 'p'
	evAnomaly  = 'n'
	evTool     = 'o'
	evReason   = 'r'
	evCode     = 'c'
	evID       = 'i'
)

var eventFieldNames = map[byte]string{
	evSpace: "space", evEffect: "effect", evType: "type", evKind: "kind", evForm: "form", evFrom: "from",
	evProposal: "proposal", evAnomaly: "anomaly", evTool: "tool", evReason: "reason", evCode: "code", evID: "id",
}

// Tables of the event index in api.KeyInfo (verify's differences).
const (
	TableEvent      = "event_record"
	TableEventIndex = "event_index"
	TableEventTime  = "event_time"
)

// EventRecord and EventEntry are the model's (GET /v1/events).
type (
	EventRecord = api.EventRecord
	EventEntry  = api.EventEntry
)

// eventIndexKeys appends the record's 'J' and 'K' keys to dst, sorted and
// distinct, their bytes in a (valid until a is reset). A nil r has none.
// Its posting fields are postingEntries' (store_postings.go).
func eventIndexKeys(dst [][]byte, a *arena, r *EventRecord) [][]byte {
	if r == nil {
		return dst
	}
	first := len(dst)
	add := func(f byte, v string) {
		if v == "" || postingField(f) {
			return
		}
		st := len(a.b)
		a.b = appendU64(appendEsc(append(a.b, tagEventIndex, f), v), r.Seq)
		dst = append(dst, a.take(st))
	}
	add(evSpace, r.Space)
	for _, e := range r.Effects {
		add(evEffect, string(e))
	}
	add(evType, r.Type)
	add(evKind, r.Kind)
	add(evForm, r.Form)
	add(evFrom, r.From)
	for _, p := range r.Proposals {
		add(evProposal, p)
	}
	for _, an := range r.Anomalies {
		add(evAnomaly, an)
	}
	add(evTool, r.Tool)
	add(evReason, r.Reason)
	for _, e := range r.Entries {
		add(evCode, e.Code)
	}
	add(evID, r.ID)
	st := len(a.b)
	a.b = appendU64(appendNanos(append(a.b, tagEventTime), clampNanos(r.At)), r.Seq)
	dst = append(dst, a.take(st))
	ks := dst[first:]
	slices.SortFunc(ks, bytes.Compare)
	ks = slices.CompactFunc(ks, bytes.Equal)
	return dst[:first+len(ks)]
}

// appendMarshalEvent appends json.Marshal(r) to b (encode.go's writer,
// json.Marshal for what it leaves to it).
func appendMarshalEvent(b []byte, r *EventRecord) ([]byte, error) {
	w := newWriter(b)
	w.u64("seq", r.Seq)
	w.time("at", r.At)
	w.str("space", r.Space)
	w.strOmit("key", r.Key)
	w.strOmit("id", r.ID)
	w.strOmit("type", r.Type)
	w.strOmit("kind", r.Kind)
	w.strOmit("form", r.Form)
	w.strOmit("from", r.From)
	w.strOmit("reason", r.Reason)
	w.strOmit("method", r.Method)
	w.strOmit("tool", r.Tool)
	w.strOmit("arg", r.Arg)
	w.strOmit("digest", r.Digest)
	w.str("effect", string(r.Effect))
	w.key("effects")
	if r.Effects == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i, e := range r.Effects {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = canon.AppendStringHTML(w.b, string(e))
		}
		w.b = append(w.b, ']')
	}
	w.stringsOmit("proposals", r.Proposals)
	w.stringsOmit("anomalies", r.Anomalies)
	w.strOmit("code", r.Code)
	w.strOmit("detail", r.Detail)
	w.key("entries")
	if r.Entries == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i := range r.Entries {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			e := &r.Entries[i]
			o := newWriter(w.b)
			o.str("key", e.Key)
			o.str("effect", string(e.Effect))
			o.strOmit("code", e.Code)
			o.strOmit("detail", e.Detail)
			o.stringsOmit("anomalies", e.Anomalies)
			o.strOmit("target", e.Target)
			o.strOmit("outcome", e.Outcome)
			o.u64Omit("resolved_seq", e.ResolvedSeq)
			w.b, _ = o.end()
		}
		w.b = append(w.b, ']')
	}
	if out, ok := w.end(); ok {
		return out, nil
	}
	j, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

func eventKey(seq uint64) []byte { return appendU64([]byte{tagEvent}, seq) }

func eventIndexPrefix(f byte, v string) []byte {
	return appendEsc([]byte{tagEventIndex, f}, v)
}

// evSlot is the overlay's slot of one event record.
type evSlot struct {
	orig, cur *EventRecord // orig: the version in Pebble (nil: none)
	// The memory of a record made by RecordEvent, allocated with its
	// slot: the record and room for one entry, effect and proposal (most
	// events have one), which its slices start in.
	rec  EventRecord
	ent  [1]EventEntry
	eff  [1]api.Effect
	prop [1]string
}

// RecordEvent implements fold.EventRecorder: the record of an arriving
// event, before the fold writes its history entries.
func (b *Batch) RecordEvent(ev *fold.Event) error {
	if err := b.check(); err != nil {
		return err
	}
	if err := b.endArrival(b.coverSeq); err != nil { // the previous arrival's holes
		return err
	}
	b.coverSeq = ev.Seq
	sl := &evSlot{}
	r := &sl.rec
	*r = EventRecord{Seq: ev.Seq, At: ev.Time.UTC(), Entries: sl.ent[:0], Effects: sl.eff[:0], Proposals: sl.prop[:0]}
	if space, d, ok := ev.Decoded(); ok {
		r.Space, r.Key, r.Digest, r.Method = space, d.Key, d.Digest, d.Method
		r.ID, r.Type, r.Kind, r.From, r.Form, r.Reason = d.Env.ID, string(d.Type), d.OrigKind, d.Env.From, d.Form, d.Reason
		r.Tool, r.Arg = toolCall(d.Method, d.Params)
	} else if sub, err := subjects.ParseEvent(ev.Subject); err == nil {
		r.Space, r.Key, r.From = sub.Space, sub.Key, sub.Sender
	} else {
		r.Space, r.Key = subjects.FiledUnder(ev.Subject)
	}
	if b.events == nil {
		b.events = map[uint64]*evSlot{}
	}
	sl.cur = r
	b.events[ev.Seq] = sl
	b.dirty++
	return nil
}

// eventSlot returns the overlay's slot of seq's record, reading it from the
// pending batch or Pebble the first time; nil when there is no record (an
// event folded by a fold without a recorder).
func (b *Batch) eventSlot(seq uint64) (*evSlot, error) {
	if sl, ok := b.events[seq]; ok {
		return sl, nil
	}
	var prev *EventRecord
	if b.fromPending(func(p *Batch) bool {
		sl, ok := p.events[seq]
		if ok {
			prev = sl.cur
		}
		return ok
	}) {
		sl := &evSlot{orig: prev, cur: prev.Clone()}
		b.addEventSlot(seq, sl)
		return sl, nil
	}
	var r *EventRecord
	err := b.read(func(rd pebble.Reader) error {
		_, err := getBin(rd, eventKey(seq), func(v []byte) (err error) {
			r, err = decodeEventRecord(seq, v)
			return err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: batch: read event record seq %d: %w", seq, err)
	}
	if r == nil {
		return nil, nil
	}
	sl := &evSlot{orig: r, cur: r.Clone()}
	b.addEventSlot(seq, sl)
	return sl, nil
}

func (b *Batch) addEventSlot(seq uint64, sl *evSlot) {
	if b.events == nil {
		b.events = map[uint64]*evSlot{}
	}
	b.events[seq] = sl
	b.dirty++
}

// noteHistory files h in its event's record (PutHistory).
func (b *Batch) noteHistory(space, key string, h *api.HistoryEntry) error {
	sl, err := b.eventSlot(h.Seq)
	if err != nil || sl == nil {
		return err
	}
	r := sl.cur
	if r.Space != space {
		return nil // filed in another space than the event's: not this record's
	}
	e := EventEntry{Key: key, Effect: h.Effect, Code: h.Code, Detail: h.Detail, Anomalies: slices.Clone(h.Anomalies),
		Target: h.Target, Outcome: h.Outcome, ResolvedSeq: h.ResolvedSeq}
	if i := slices.IndexFunc(r.Entries, func(x EventEntry) bool { return x.Key == key }); i >= 0 {
		r.Entries[i] = e
	} else {
		r.Entries = append(r.Entries, e)
	}
	// What the history entry says of the event wins over the decoding
	// (an invalid event's best-effort id).
	if r.ID == "" {
		r.ID = h.ID
	}
	if r.Type == "" {
		r.Type = h.Type
	}
	if r.Kind == "" {
		r.Kind = h.Kind
	}
	if r.From == "" {
		r.From = h.From
	}
	r.Derive() // now, not at Commit: a later batch may read a handed-off batch's records
	return nil
}

// noteHistoryDelete drops key's entry from seq's record (DeleteHistory).
func (b *Batch) noteHistoryDelete(space, key string, seq uint64) error {
	sl, err := b.eventSlot(seq)
	if err != nil || sl == nil || sl.cur.Space != space {
		return err
	}
	sl.cur.Entries = slices.DeleteFunc(sl.cur.Entries, func(x EventEntry) bool { return x.Key == key })
	sl.cur.Derive()
	return nil
}

// collectEvents appends the writes of the event records and their index
// keys (the old version's that are gone deleted, the new ones written).
func (b *Batch) collectEvents(c *commitBuf, ops []kv) ([]kv, error) {
	old, cur := c.evOld[:0], c.evCur[:0]
	pch := c.postings[:0]
	for seq, sl := range b.events {
		old = postingEntries(old[:0], &c.a, sl.orig)
		cur = postingEntries(cur[:0], &c.a, sl.cur)
		pch = diffPostings(pch, seq, old, cur)
		ks := len(c.a.b)
		c.a.b = appendU64(append(c.a.b, tagEvent), seq)
		vs := len(c.a.b)
		c.a.b = appendEventRecordBin(c.a.b, sl.cur)
		ops = append(ops, kv{key: c.a.b[ks:vs:vs], val: c.a.take(vs)})
		old = eventIndexKeys(old[:0], &c.a, sl.orig)
		cur = eventIndexKeys(cur[:0], &c.a, sl.cur)
		i, j := 0, 0
		for i < len(old) || j < len(cur) {
			switch {
			case j == len(cur) || (i < len(old) && bytes.Compare(old[i], cur[j]) < 0):
				ops = append(ops, kv{key: old[i], del: true})
				i++
			case i == len(old) || bytes.Compare(old[i], cur[j]) > 0:
				ops = append(ops, kv{key: cur[j], val: emptyVal})
				j++
			default:
				i++
				j++
			}
		}
	}
	c.evOld, c.evCur = old[:0], cur[:0]
	ops, err := collectPostings(b.s.db, c, pch, ops)
	clear(pch)
	c.postings = pch[:0]
	if err != nil {
		return nil, fmt.Errorf("event index: %w", err)
	}
	return ops, nil
}

// emptyVal is the value of the event index's keys.
var emptyVal = []byte{}

// mainArgKeys are the argument names taken as a tool call's main argument,
// in order of preference.
var mainArgKeys = []string{"path", "file", "filename", "command", "cmd", "url", "uri", "query", "target", "name", "id"}

// toolCall returns params.name of a tools/call and its main argument: the
// first of mainArgKeys in params.arguments with a string value, else the
// first string argument in key order; for another method, params.uri or
// params.name. Values are cut to 200 bytes. params is a decoded
// envelope's (canon accepted it: valid JSON, no duplicate keys). It scans
// params instead of decoding it (encoding/json was 4% of a rebuild's CPU)
// and answers as toolCallJSON, the decode it replaces, does; a key that
// encoding/json might match case-insensitively, or with escapes, is left
// to toolCallJSON (FuzzToolCall compares the two).
func toolCall(method string, params json.RawMessage) (tool, arg string) {
	if len(params) == 0 || params[0] != '{' {
		return "", ""
	}
	var name, uri, args json.RawMessage
	slow := false
	ledger.EachMember(params, func(k []byte, v json.RawMessage) bool {
		switch string(k) {
		case "name":
			name = v
		case "uri":
			uri = v
		case "arguments":
			args = v
		default:
			if foldCandidate(k, "name", "uri", "arguments") {
				slow = true
				return false
			}
		}
		return true
	})
	// name and uri decode into interfaces: a number there may not fit a
	// float64 (an error for json.Unmarshal), so anything but a string or a
	// literal goes the slow way.
	if slow || !plainValue(name) || !plainValue(uri) {
		return toolCallJSON(method, params)
	}
	if args != nil && args[0] != '{' && string(args) != "null" {
		return "", "" // json.Unmarshal fails: arguments is not an object
	}
	nm, _ := jsonString(name)
	if method != "tools/call" {
		if u, ok := jsonString(uri); ok {
			return "", cut(u)
		}
		return "", cut(nm)
	}
	if args == nil || args[0] != '{' {
		return cut(nm), ""
	}
	best := len(mainArgKeys)
	var bestVal, firstVal json.RawMessage
	var firstKey []byte
	ledger.EachMember(args, func(k []byte, v json.RawMessage) bool {
		if bytes.IndexByte(k, '\\') >= 0 {
			slow = true
			return false
		}
		if len(v) == 0 || v[0] != '"' {
			return true
		}
		if firstVal == nil || bytes.Compare(k, firstKey) < 0 {
			firstKey, firstVal = k, v
		}
		if i := slices.Index(mainArgKeys[:best], string(k)); i >= 0 {
			best, bestVal = i, v
		}
		return true
	})
	if slow {
		return toolCallJSON(method, params)
	}
	if bestVal != nil {
		s, _ := jsonString(bestVal)
		return cut(nm), cut(s)
	}
	if firstVal != nil {
		s, _ := jsonString(firstVal)
		return cut(nm), cut(s)
	}
	return cut(nm), ""
}

// plainValue reports whether v is absent, a string or a literal.
func plainValue(v json.RawMessage) bool {
	if len(v) == 0 {
		return true
	}
	switch v[0] {
	case '"', 't', 'f', 'n':
		return true
	}
	return false
}

// foldCandidate reports whether the raw key k is not one of names but
// encoding/json might still match it to one (its case-insensitive match
// of struct fields, escapes, non-ASCII folds such as U+017F to 's').
func foldCandidate(k []byte, names ...string) bool {
	for _, c := range k {
		if c == '\\' || c >= utf8.RuneSelf {
			return true
		}
	}
	for _, n := range names {
		if len(k) == len(n) && strings.EqualFold(string(k), n) {
			return true
		}
	}
	return false
}

// jsonString returns the string a JSON string value holds; ok is false
// for any other value (or none).
func jsonString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// toolCallJSON is toolCall by encoding/json: the reference, and the path
// of the params toolCall's scanner leaves to it.
func toolCallJSON(method string, params json.RawMessage) (tool, arg string) {
	if len(params) == 0 || params[0] != '{' {
		return "", ""
	}
	var p struct {
		Name      any                        `json:"name"`
		URI       any                        `json:"uri"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", ""
	}
	name, _ := p.Name.(string)
	if method != "tools/call" {
		if u, ok := p.URI.(string); ok {
			return "", cut(u)
		}
		return "", cut(name)
	}
	str := func(raw json.RawMessage) (string, bool) {
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	for _, k := range mainArgKeys {
		if s, ok := str(p.Arguments[k]); ok {
			return cut(name), cut(s)
		}
	}
	keys := make([]string, 0, len(p.Arguments))
	for k := range p.Arguments {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s, ok := str(p.Arguments[k]); ok {
			return cut(name), cut(s)
		}
	}
	return cut(name), ""
}

// cut returns s cut to 200 bytes at a rune boundary.
func cut(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// EventQuery selects events of the ledger (GET /v1/events). Empty strings
// and zero times and sequences do not filter; every filter given must hold.
type EventQuery struct {
	Space, Effect, Type, Kind, Form, From, Proposal, Anomaly, Tool, Reason, Code, ID string
	// Since and Until bound the stream time (inclusive).
	Since, Until time.Time
	// SinceSeq and UntilSeq bound the sequence (inclusive).
	SinceSeq, UntilSeq uint64
	// Desc lists the newest first; the default is stream order.
	Desc bool
	// Limit is the page size: 1..MaxEventLimit, 0 for DefaultEventLimit.
	Limit int
	// Cursor continues a page in the same order (EventPage.NextCursor).
	Cursor string
}

// Page sizes of Events.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
)

// EventPage is one page of Events (the model's).
type EventPage = api.EventPage

func (q *EventQuery) filters() []filterTerm {
	var fs []filterTerm
	add := func(f byte, v string) {
		switch {
		case v == "":
		case postingField(f):
			fs = append(fs, filterTerm{prefix: eventPostingPrefix(f, v), posting: true})
		default:
			fs = append(fs, filterTerm{prefix: eventIndexPrefix(f, v)})
		}
	}
	add(evSpace, q.Space)
	add(evEffect, q.Effect)
	add(evType, q.Type)
	add(evKind, q.Kind)
	add(evForm, q.Form)
	add(evFrom, q.From)
	add(evProposal, q.Proposal)
	add(evAnomaly, q.Anomaly)
	add(evTool, q.Tool)
	add(evReason, q.Reason)
	add(evCode, q.Code)
	add(evID, q.ID)
	return fs
}

// filterTerm is one filter of a zigzag join: the per-event keys under
// prefix ('J'), or the posting lists under it ('Q'; the block in hand
// decoded in seqs).
type filterTerm struct {
	prefix  []byte
	it      *pebble.Iterator
	posting bool
	have    bool
	blk     uint64
	seqs    []uint64
}

// Cursors of Events: base64url (no padding) of version byte 2, the order
// ('a' or 'd') and the last listed sequence (8 B BE).
const eventCursorVersion = 2

func encodeEventCursor(seq uint64, desc bool) string {
	o := byte('a')
	if desc {
		o = 'd'
	}
	return base64.RawURLEncoding.EncodeToString(appendU64([]byte{eventCursorVersion, o}, seq))
}

func decodeEventCursor(c string, desc bool) (uint64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != 10 || b[0] != eventCursorVersion || (b[1] != 'a' && b[1] != 'd') {
		return 0, fmt.Errorf("%w: cursor %q is not an events cursor", ErrBadQuery, c)
	}
	if (b[1] == 'd') != desc {
		return 0, fmt.Errorf("%w: cursor %q was made for the other order", ErrBadQuery, c)
	}
	return binary.BigEndian.Uint64(b[2:]), nil
}

// Events returns a page of the ledger's events that match q, in stream
// order (or newest first), from the event index. Bad parameters return an
// error wrapping ErrBadQuery. Safe for concurrent use.
func (s *Store) Events(q EventQuery) (*EventPage, error) {
	raw, err := s.EventsRaw(q)
	if err != nil {
		return nil, err
	}
	page := &EventPage{Events: make([]EventRecord, len(raw.Events)), NextCursor: raw.NextCursor}
	for i, rec := range raw.Events {
		if err := json.Unmarshal(rec, &page.Events[i]); err != nil {
			return nil, fmt.Errorf("projections: events: decode record: %w", err)
		}
	}
	return page, nil
}

// RawEventPage is a page of Events as JSON: each record as json.Marshal
// writes it (the stored binary record, decoded and encoded).
type RawEventPage struct {
	Events     []json.RawMessage
	NextCursor string
}

// EventsRaw is Events with the records as their JSON: the API writes them
// as they are. Safe for concurrent use.
func (s *Store) EventsRaw(q EventQuery) (*RawEventPage, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultEventLimit
	case limit < 0 || limit > MaxEventLimit:
		return nil, fmt.Errorf("%w: limit %d is outside 1..%d", ErrBadQuery, limit, MaxEventLimit)
	}
	lo, hi := max(q.SinceSeq, 1), uint64(math.MaxUint64)
	if q.UntilSeq != 0 {
		hi = q.UntilSeq
	}
	page := &RawEventPage{Events: []json.RawMessage{}}
	if q.Cursor != "" {
		c, err := decodeEventCursor(q.Cursor, q.Desc)
		if err != nil {
			return nil, err
		}
		if q.Desc {
			if c == 0 {
				return page, nil
			}
			hi = min(hi, c-1)
		} else {
			lo = max(lo, c+1)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return nil, fmt.Errorf("%w: until %s is before since %s", ErrBadQuery, q.Until.Format(time.RFC3339Nano), q.Since.Format(time.RFC3339Nano))
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	timed := !q.Since.IsZero() || !q.Until.IsZero()
	// Times → a sequence range through 'K' (stream times are in stream
	// order; the records' times are checked again below).
	if timed {
		tlo, thi, ok, err := timeRange(snap, q.Since, q.Until)
		if err != nil {
			return nil, err
		}
		if !ok {
			return page, nil
		}
		lo, hi = max(lo, tlo), min(hi, thi)
	}
	if lo > hi {
		return page, nil
	}
	var last uint64
	emit := func(seq uint64) (bool, error) {
		val, closer, err := snap.Get(eventKey(seq))
		if errors.Is(err, pebble.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("projections: events: read seq %d: %w", seq, err)
		}
		r, err := decodeEventRecord(seq, val)
		_ = closer.Close()
		if err != nil {
			return false, fmt.Errorf("projections: events: %w", err)
		}
		if timed && !inTime(r.At, &q) {
			return true, nil
		}
		if len(page.Events) == limit {
			page.NextCursor = encodeEventCursor(last, q.Desc)
			return false, nil
		}
		rec, err := appendMarshalEvent(nil, r)
		if err != nil {
			return false, fmt.Errorf("projections: events: encode seq %d: %w", seq, err)
		}
		page.Events = append(page.Events, rec)
		last = seq
		return true, nil
	}
	var err error
	if fs := q.filters(); len(fs) == 0 {
		err = walkPrimary(snap, lo, hi, q.Desc, emit)
	} else {
		err = zigzag(snap, fs, lo, hi, q.Desc, emit)
	}
	if err != nil {
		return nil, err
	}
	return page, nil
}

func inTime(at time.Time, q *EventQuery) bool {
	if !q.Since.IsZero() && at.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && at.After(q.Until) {
		return false
	}
	return true
}

// timeRange maps [since, until] to the sequences of the first event at or
// after since and the last at or before until; ok is false when none.
func timeRange(r pebble.Reader, since, until time.Time) (lo, hi uint64, ok bool, err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{tagEventTime}, UpperBound: []byte{tagEventTime + 1}})
	if err != nil {
		return 0, 0, false, err
	}
	defer it.Close()
	lo, hi = 1, math.MaxUint64
	if !since.IsZero() {
		if !it.SeekGE(appendNanos([]byte{tagEventTime}, clampNanos(since))) {
			return 0, 0, false, it.Error()
		}
		lo = binary.BigEndian.Uint64(it.Key()[9:])
	}
	if !until.IsZero() {
		n := clampNanos(until)
		var k []byte
		if n == math.MaxInt64 {
			k = []byte{tagEventTime + 1}
		} else {
			k = appendNanos([]byte{tagEventTime}, n+1)
		}
		if !it.SeekLT(k) {
			return 0, 0, false, it.Error()
		}
		hi = binary.BigEndian.Uint64(it.Key()[9:])
	}
	return lo, hi, lo <= hi, nil
}

// walkPrimary calls emit for every record's sequence in [lo, hi], in order,
// until emit says stop.
func walkPrimary(r pebble.Reader, lo, hi uint64, desc bool, emit func(uint64) (bool, error)) error {
	opts := &pebble.IterOptions{LowerBound: eventKey(lo)}
	if hi < math.MaxUint64 {
		opts.UpperBound = eventKey(hi + 1)
	} else {
		opts.UpperBound = []byte{tagEvent + 1}
	}
	it, err := r.NewIter(opts)
	if err != nil {
		return err
	}
	defer it.Close()
	valid := it.First()
	if desc {
		valid = it.Last()
	}
	for ; valid; valid = step(it, desc) {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		more, err := emit(binary.BigEndian.Uint64(k[1:]))
		if err != nil || !more {
			return err
		}
	}
	return it.Error()
}

func step(it *pebble.Iterator, desc bool) bool {
	if desc {
		return it.Prev()
	}
	return it.Next()
}

// zigzag intersects the filters' 'J' lists within [lo, hi] by seeking,
// calling emit for each sequence in all of them, in order.
func zigzag(r pebble.Reader, fs []filterTerm, lo, hi uint64, desc bool, emit func(uint64) (bool, error)) error {
	for i := range fs {
		opts := &pebble.IterOptions{LowerBound: fs[i].prefix, UpperBound: prefixEnd(fs[i].prefix)}
		it, err := r.NewIter(opts)
		if err != nil {
			return err
		}
		fs[i].it = it
	}
	defer func() {
		for _, f := range fs {
			_ = f.it.Close()
		}
	}()
	// seek positions f at the first entry at or after cand (before, when
	// desc) and returns its sequence; ok false when there is none.
	seek := func(f *filterTerm, cand uint64) (uint64, bool, error) {
		if f.posting {
			return f.seekPosting(cand, desc)
		}
		var valid bool
		if desc {
			if cand == math.MaxUint64 {
				valid = f.it.Last()
			} else {
				valid = f.it.SeekLT(appendU64(bytes.Clone(f.prefix), cand+1))
			}
		} else {
			valid = f.it.SeekGE(appendU64(bytes.Clone(f.prefix), cand))
		}
		if !valid {
			return 0, false, nil
		}
		k := f.it.Key()
		return binary.BigEndian.Uint64(k[len(k)-8:]), true, nil
	}
	cand := lo
	if desc {
		cand = hi
	}
	for {
		if cand < lo || cand > hi {
			break
		}
		agreed := true
		for i := range fs {
			seq, ok, err := seek(&fs[i], cand)
			if err != nil {
				return fmt.Errorf("projections: events: %w", err)
			}
			if !ok {
				return nil
			}
			if seq != cand {
				cand, agreed = seq, false
				break
			}
		}
		if !agreed {
			continue
		}
		more, err := emit(cand)
		if err != nil || !more {
			return err
		}
		if desc {
			if cand == 0 {
				break
			}
			cand--
		} else {
			if cand == math.MaxUint64 {
				break
			}
			cand++
		}
	}
	for _, f := range fs {
		if err := f.it.Error(); err != nil {
			return err
		}
	}
	return nil
}

// Event returns the record of the event at seq, or an error wrapping
// ErrNotFound. Safe for concurrent use.
func (s *Store) Event(seq uint64) (*EventRecord, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	var r *EventRecord
	found, err := getBin(s.db, eventKey(seq), func(v []byte) (err error) {
		r, err = decodeEventRecord(seq, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("projections: event seq %d: %w", seq, err)
	}
	if !found {
		return nil, fmt.Errorf("projections: event seq %d: %w", seq, ErrNotFound)
	}
	return r, nil
}

// decodeEventKey decodes the keys of the event index (DecodeKey).
func decodeEventKey(key []byte) (api.KeyInfo, bool) {
	if len(key) == 0 {
		return api.KeyInfo{}, false
	}
	switch key[0] {
	case tagEvent:
		if len(key) != 9 {
			return api.KeyInfo{}, false
		}
		return api.KeyInfo{Table: TableEvent, Seq: binary.BigEndian.Uint64(key[1:]), Raw: bytes.Clone(key)}, true
	case tagEventTime:
		if len(key) != 17 {
			return api.KeyInfo{}, false
		}
		return api.KeyInfo{Table: TableEventTime, Seq: binary.BigEndian.Uint64(key[9:]), Deadline: time.Unix(0, readNanos(key[1:9])).UTC(), Raw: bytes.Clone(key)}, true
	case tagEventIndex:
		if len(key) < 2 {
			return api.KeyInfo{}, false
		}
		name, ok := eventFieldNames[key[1]]
		if !ok {
			return api.KeyInfo{}, false
		}
		v, rest, err := readEsc(key[2:])
		if err != nil || len(rest) != 8 {
			return api.KeyInfo{}, false
		}
		return api.KeyInfo{Table: TableEventIndex, Index: name, Value: v, Seq: binary.BigEndian.Uint64(rest), Raw: bytes.Clone(key)}, true
	case tagEventPosting:
		if len(key) < 2 {
			return api.KeyInfo{}, false
		}
		name, ok := eventFieldNames[key[1]]
		if !ok {
			return api.KeyInfo{}, false
		}
		v, rest, err := readEsc(key[2:])
		if err != nil || len(rest) != 8 {
			return api.KeyInfo{}, false
		}
		// Seq is the block's first sequence.
		return api.KeyInfo{Table: TableEventPosting, Index: name, Value: v, Seq: binary.BigEndian.Uint64(rest) << postingShift, Raw: bytes.Clone(key)}, true
	}
	return api.KeyInfo{}, false
}

var _ fold.EventRecorder = (*Batch)(nil)
