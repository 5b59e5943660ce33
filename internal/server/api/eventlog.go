package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// The event log routes (contract §7): every event of the ledger from the event
// index the fold writes (projections.Store.Events), and one event's stored
// message read from JetStream by sequence.
const (
	RouteEventList = "GET /v1/events"
	RouteEvent     = "GET /v1/events/{seq}"
)

// Query parameters of GET /v1/events (space, since, until, anomaly, form,
// limit and cursor are reads.go's).
const (
	paramEffect   = "effect"
	paramType     = "type"
	paramKind     = "kind"
	paramFrom     = "from"
	paramTool     = "tool"
	paramReason   = "reason"
	paramCode     = "code"
	paramEventID  = "event"
	paramUntilSeq = "until_seq"
	paramOrder    = "order"
)

// RawMessage is one stored message of the stream, as Options.RawEvent
// returns it.
type RawMessage struct {
	Subject string
	Header  map[string][]string
	Data    []byte
	Time    time.Time
}

// RawEventFunc reads the stored message at seq from the stream; a sequence
// the stream does not hold is an error wrapping ErrNoMessage.
type RawEventFunc func(ctx context.Context, seq uint64) (*RawMessage, error)

// ErrNoMessage is wrapped by a RawEventFunc's error for a sequence the
// stream does not hold: answered 404.
var ErrNoMessage = errors.New("api: no such message in the stream")

// eventReader is the optional part of a Reader that lists the event index
// (*projections.Store implements it).
type eventReader interface {
	EventsRaw(q projections.EventQuery) (*projections.RawEventPage, error)
	Event(seq uint64) (*projections.EventRecord, error)
}

var errNoEvents = errors.New("api: this projection has no event index")

// EventsRaw is the reader in place's EventsRaw, or errNoEvents.
func (s *swapReader) EventsRaw(q projections.EventQuery) (*projections.RawEventPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e, ok := s.r.(eventReader); ok {
		return e.EventsRaw(q)
	}
	return nil, errNoEvents
}

// Event is the reader in place's Event, or errNoEvents.
func (s *swapReader) Event(seq uint64) (*projections.EventRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e, ok := s.r.(eventReader); ok {
		return e.Event(seq)
	}
	return nil, errNoEvents
}

var knownEffects = []string{string(api.EffectApplied), string(api.EffectRecorded), string(api.EffectDuplicate),
	string(api.EffectLate), string(api.EffectUnauthorized), string(api.EffectInvalid), string(api.EffectOrphan),
	string(api.EffectIgnored)}

// AllSpaces as ?space= of the event routes means every space (a token
// limited to spaces is refused it by the route guard, which checks the
// space given against the token's list).
const AllSpaces = "*"

// eventSpace returns the space filter of an event route: ?space=, else the
// default space; "" for AllSpaces.
func (a *API) eventSpace(q url.Values) (string, *api.Error) {
	if q.Get(paramSpace) == AllSpaces {
		return "", nil
	}
	return a.space(q)
}

// eventQuery parses the query of GET /v1/events. Without ?space= it lists
// the default space (as every read does); space=* lists every space. An as-of point caps the range (until_seq, until): the list
// of the past is the events stored by then, shown as the fold sees them now.
func (a *API) eventQuery(q url.Values) (projections.EventQuery, *api.Error) {
	var eq projections.EventQuery
	var e *api.Error
	if eq.Space, e = a.eventSpace(q); e != nil {
		return eq, e
	}
	if v := q.Get(paramEffect); v != "" && !slices.Contains(knownEffects, v) {
		return eq, badParam(paramEffect, "effect %q is not one of %v", v, knownEffects)
	}
	if v := q.Get(paramAnomaly); v != "" && !slices.Contains(api.AnomalyNames, v) {
		return eq, badParam(paramAnomaly, "anomaly %q is not one of %v", v, api.AnomalyNames)
	}
	eq.Effect, eq.Type, eq.Kind, eq.Form = q.Get(paramEffect), q.Get(paramType), q.Get(paramKind), q.Get(paramForm)
	eq.From, eq.Proposal, eq.Anomaly, eq.Tool = q.Get(paramFrom), q.Get(paramProposal), q.Get(paramAnomaly), q.Get(paramTool)
	eq.Reason, eq.Code, eq.ID = q.Get(paramReason), q.Get(paramCode), q.Get(paramEventID)
	if v := q.Get(paramSince); v != "" {
		if eq.Since, e = parseTime(paramSince, v); e != nil {
			return eq, e
		}
	}
	if v := q.Get(paramUntil); v != "" {
		if eq.Until, e = parseTime(paramUntil, v); e != nil {
			return eq, e
		}
	}
	seqParam := func(name string) (uint64, *api.Error) {
		v := q.Get(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return 0, badParam(name, "%s must be a stream sequence (an integer ≥ 1), not %q", name, v)
		}
		return n, nil
	}
	if eq.SinceSeq, e = seqParam(paramSinceSeq); e != nil {
		return eq, e
	}
	if eq.UntilSeq, e = seqParam(paramUntilSeq); e != nil {
		return eq, e
	}
	asOfSeq, e := seqParam(paramAsOfSeq)
	if e != nil {
		return eq, e
	}
	if asOfSeq != 0 && (eq.UntilSeq == 0 || asOfSeq < eq.UntilSeq) {
		eq.UntilSeq = asOfSeq
	}
	if v := q.Get(paramAsOf); v != "" {
		t, e := parseTime(paramAsOf, v)
		if e != nil {
			return eq, e
		}
		if eq.Until.IsZero() || t.Before(eq.Until) {
			eq.Until = t
		}
	}
	switch v := q.Get(paramOrder); v {
	case "", "asc":
	case "desc":
		eq.Desc = true
	default:
		return eq, badParam(paramOrder, "order must be asc (stream order, the default) or desc (newest first), not %q", v)
	}
	if v := q.Get(paramLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > projections.MaxEventLimit {
			return eq, badParam(paramLimit, "limit must be an integer in 1..%d, not %q", projections.MaxEventLimit, v)
		}
		eq.Limit = n
	}
	eq.Cursor = q.Get(paramCursor)
	return eq, nil
}

// listEvents answers GET /v1/events: {"events":[...],"next_cursor":".."}.
func (a *API) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramSpace, paramMinSeq, paramEffect, paramType, paramKind, paramForm, paramFrom, paramProposal,
		paramAnomaly, paramTool, paramReason, paramCode, paramEventID, paramSince, paramUntil, paramSinceSeq,
		paramUntilSeq, paramOrder, paramLimit, paramCursor, paramAsOfSeq, paramAsOf); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if q.Get(paramAsOfSeq) != "" && q.Get(paramAsOf) != "" {
		writeError(w, http.StatusBadRequest, badParam(paramAsOf, "give as_of_seq or as_of, not both"))
		return
	}
	eq, e := a.eventQuery(q)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if !a.eventsAsOfInLog(w, r, q) {
		return
	}
	if !a.waitMinSeq(w, r, q) {
		return
	}
	page, err := a.reader.EventsRaw(eq)
	switch {
	case errors.Is(err, projections.ErrBadQuery):
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBadQuery, Field: paramCursor, Message: err.Error()})
		return
	case err != nil:
		a.internal(w, r, err)
		return
	}
	// The stored records are written as they are (json.Marshal's output):
	// decoding and encoding a page of 100 was most of its time.
	n := 64 + len(page.NextCursor)
	for _, rec := range page.Events {
		n += len(rec) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"events":[`...)
	for i, rec := range page.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, rec...)
	}
	b = append(b, ']')
	if page.NextCursor != "" {
		b = append(b, `,"next_cursor":`...)
		b = strconv.AppendQuote(b, page.NextCursor)
	}
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// getEvent answers GET /v1/events/{seq}[?space=]: the stored message
// (subject, headers, stream time, original bytes, their SHA-256) with its
// record in the event index. The message must be filed in the space asked
// for (default: the default space; * any): a message of another space is
// answered 404, so that a token limited to spaces reads only its own.
func (a *API) getEvent(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if e := params(q, paramMinSeq, paramSpace); e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	space, e := a.eventSpace(q)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	v := r.PathValue("seq")
	seq, err := strconv.ParseUint(v, 10, 64)
	if err != nil || seq == 0 {
		writeError(w, http.StatusBadRequest, badParam("seq", "seq must be a stream sequence (an integer ≥ 1), not %q", v))
		return
	}
	if !a.waitMinSeq(w, r, q) {
		return
	}
	if a.opts.RawEvent == nil {
		a.internal(w, r, errors.New("api: no stream reader (Options.RawEvent)"))
		return
	}
	m, err := a.opts.RawEvent(r.Context(), seq)
	switch {
	case errors.Is(err, ErrNoMessage):
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "seq",
			Message: "the stream holds no message at seq " + v})
		return
	case err != nil:
		a.internal(w, r, err)
		return
	}
	if sp, _ := subjects.FiledUnder(m.Subject); space != "" && sp != space {
		writeError(w, http.StatusNotFound, &api.Error{Code: api.CodeNotFound, Field: "seq",
			Message: fmt.Sprintf("the message at seq %s is not in space %q (give space=* for any space)", v, space)})
		return
	}
	sum := sha256.Sum256(m.Data)
	out := api.RawEvent{Seq: seq, Subject: m.Subject, Time: m.Time.UTC(), Headers: m.Header, Data: m.Data,
		SHA256: hex.EncodeToString(sum[:])}
	if out.Data == nil {
		out.Data = []byte{}
	}
	if utf8.Valid(m.Data) {
		out.Text = string(m.Data)
	}
	if ids := m.Header["Nats-Msg-Id"]; len(ids) > 0 {
		out.MsgID = ids[0]
	}
	rec, err := a.reader.Event(seq)
	switch {
	case errors.Is(err, projections.ErrNotFound), errors.Is(err, errNoEvents):
	case err != nil:
		a.internal(w, r, err)
		return
	default:
		out.Event = rec
	}
	writeJSON(w, http.StatusOK, out)
}

// eventsAsOfInLog refuses an as-of point of GET /v1/events after the end
// of the log as every other as-of read does: 400 beyond_log (a sequence
// past the stream's last, a time in the future). On false it has
// answered.
func (a *API) eventsAsOfInLog(w http.ResponseWriter, r *http.Request, q url.Values) bool {
	// eventQuery has checked both.
	var p AsOfPoint
	if v := q.Get(paramAsOfSeq); v != "" {
		p.Seq, _ = strconv.ParseUint(v, 10, 64)
	} else if v := q.Get(paramAsOf); v != "" {
		p.Time, _ = parseTime(paramAsOf, v)
	}
	switch {
	case p.Seq == 0 && p.Time.IsZero():
		return true
	case p.Seq == 0:
		if p.Time.After(time.Now()) {
			writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBeyondLog, Field: paramAsOf,
				Message: "the point is beyond the end of the log: time " + p.Time.UTC().Format(time.RFC3339Nano) + " is in the future"})
			return false
		}
		return true
	}
	last, err := a.opts.StreamSeq(r.Context())
	if err != nil {
		a.internal(w, r, err)
		return false
	}
	if p.Seq > last {
		writeError(w, http.StatusBadRequest, &api.Error{Code: api.CodeBeyondLog, Field: paramAsOfSeq,
			Message: fmt.Sprintf("the point is beyond the end of the log: sequence %d (the log ends at %d)", p.Seq, last)})
		return false
	}
	return true
}
