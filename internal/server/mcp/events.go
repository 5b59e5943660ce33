package mcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mewledger/ledger/api"
)

// EventsWhere are the space and read-your-writes arguments of the event
// tools: unlike the proposal reads, space may be "*" (every space).
type EventsWhere struct {
	Space  string `json:"space,omitempty" jsonschema:"the space (tenant) to read; * for every space (refused to a token limited to spaces); empty: the ledger's default space"`
	MinSeq uint64 `json:"min_seq,omitempty" jsonschema:"wait (bounded by the ledger) until the projection has applied this stream sequence: pass the seq an append was acknowledged with to read your own write"`
}

// values are the query of an event route for w.
func (s *Server) eventValues(w EventsWhere) url.Values {
	q := url.Values{}
	if w.Space != "" {
		q.Set("space", w.Space)
	} else if s.opts.Space != "" {
		q.Set("space", s.opts.Space)
	}
	if w.MinSeq > 0 {
		q.Set("min_seq", strconv.FormatUint(w.MinSeq, 10))
	}
	return q
}

// --- list_events

// EventsIn are list_events' arguments: GET /v1/events' filters and paging.
type EventsIn struct {
	EventsWhere
	Effect   string `json:"effect,omitempty" jsonschema:"only events with this effect on a proposal: applied, recorded, duplicate, late, unauthorized, invalid, orphan or ignored"`
	Type     string `json:"type,omitempty" jsonschema:"only events of this lifecycle type (the subject's type token, e.g. proposal, request, withdraw, reject, response)"`
	Kind     string `json:"kind,omitempty" jsonschema:"only envelopes of this MEW kind (e.g. mcp/proposal, mcp/request, mcp/withdraw)"`
	Form     string `json:"form,omitempty" jsonschema:"only events of this lifecycle form (e.g. bid)"`
	From     string `json:"from,omitempty" jsonschema:"only events sent by this participant"`
	Proposal string `json:"proposal,omitempty" jsonschema:"only events filed under this proposal id"`
	Event    string `json:"event,omitempty" jsonschema:"only the event(s) with this envelope id"`
	Anomaly  string `json:"anomaly,omitempty" jsonschema:"only events that raised this anomaly (e.g. fulfilled_after_withdrawn)"`
	Tool     string `json:"tool,omitempty" jsonschema:"only tools/call events naming this tool (params.name)"`
	Reason   string `json:"reason,omitempty" jsonschema:"only events carrying this reason code (e.g. a rejection's)"`
	Code     string `json:"code,omitempty" jsonschema:"only events the fold refused or flagged with this code"`
	Since    string `json:"since,omitempty" jsonschema:"stored at or after: RFC 3339 time or YYYY-MM-DD"`
	Until    string `json:"until,omitempty" jsonschema:"stored at or before: RFC 3339 time or YYYY-MM-DD"`
	SinceSeq uint64 `json:"since_seq,omitempty" jsonschema:"only events at or after this stream sequence"`
	UntilSeq uint64 `json:"until_seq,omitempty" jsonschema:"only events at or before this stream sequence"`
	Order    string `json:"order,omitempty" jsonschema:"asc: stream order, oldest first (the default); desc: newest first"`
	Limit    int    `json:"limit,omitempty" jsonschema:"page size (1..200, default 50)"`
	Cursor   string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page (it continues in the order it was made for)"`
}

// query is in's query of GET /v1/events with page size n.
func (s *Server) eventsQuery(in EventsIn, n int) url.Values {
	q := s.eventValues(in.EventsWhere)
	for k, v := range map[string]string{"effect": in.Effect, "type": in.Type, "kind": in.Kind, "form": in.Form,
		"from": in.From, "proposal": in.Proposal, "event": in.Event, "anomaly": in.Anomaly, "tool": in.Tool,
		"reason": in.Reason, "code": in.Code, "since": in.Since, "until": in.Until, "order": in.Order, "cursor": in.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]uint64{"since_seq": in.SinceSeq, "until_seq": in.UntilSeq} {
		if v > 0 {
			q.Set(k, strconv.FormatUint(v, 10))
		}
	}
	q.Set("limit", strconv.Itoa(n))
	return q
}

// EventsOut is a page of the ledger's events.
type EventsOut struct {
	Events []api.EventRecord `json:"events"`
	Count  int               `json:"count"`
	// NextCursor is the cursor of the next page; "" on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
	// Truncated says there is more than this page.
	Truncated bool `json:"truncated"`
}

func (s *Server) toolListEvents() {
	addTool(s, "list_events", "List the ledger's events",
		"The ledger's log itself (not a proposal's view of it): every stored event in stream order (order desc: newest first), each with its seq, stream time, space, envelope id, type, kind, sender, tool and main argument, its most telling effect and all effects, the proposal ids it is filed under, the anomalies it raised and the fold's refusal code and detail. Filtered by effect, type, kind, form, sender (from), proposal, envelope id (event), anomaly, tool, reason, code, stream time (since/until) and sequence (since_seq/until_seq), all of which must hold. One page at a time: pass next_cursor as cursor for the next. get_event answers one event's original bytes.",
		func(ctx context.Context, in EventsIn) (*EventsOut, string, error) {
			n, err := limit("limit", in.Limit, DefaultEventLimit, MaxEventLimit)
			if err != nil {
				return nil, "", err
			}
			var page api.EventPage
			if err := s.c.Do(ctx, http.MethodGet, "/v1/events", s.eventsQuery(in, n), nil, "", false, &page); err != nil {
				return nil, "", err
			}
			out := &EventsOut{Events: page.Events, Count: len(page.Events), NextCursor: page.NextCursor, Truncated: page.NextCursor != ""}
			if out.Events == nil {
				out.Events = []api.EventRecord{}
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%d events", out.Count)
			if out.Truncated {
				b.WriteString(" (more: pass next_cursor as cursor)")
			}
			for _, e := range out.Events {
				b.WriteString("\n")
				writeEvent(&b, &e)
			}
			return out, b.String(), nil
		})
}

// writeEvent writes an event's one line.
func writeEvent(b *strings.Builder, e *api.EventRecord) {
	fmt.Fprintf(b, "seq %d %s [%s] %s", e.Seq, e.At.Format(time.RFC3339), e.Space, cmpOr(e.Type, "?"))
	if e.ID != "" {
		fmt.Fprintf(b, " %s", e.ID)
	}
	if e.From != "" {
		fmt.Fprintf(b, " from %s", e.From)
	}
	if e.Tool != "" {
		fmt.Fprintf(b, " (%s)", e.Tool)
	}
	fmt.Fprintf(b, ": %s", cmpOr(string(e.Effect), "not folded"))
	if len(e.Proposals) > 0 {
		fmt.Fprintf(b, " under %s", strings.Join(e.Proposals, ", "))
	}
	if e.Code != "" {
		fmt.Fprintf(b, " (%s)", e.Code)
	}
	if len(e.Anomalies) > 0 {
		fmt.Fprintf(b, ", anomalies: %s", strings.Join(e.Anomalies, ", "))
	}
}

// maxTextBytes bounds the message get_event's text rendering quotes.
const maxTextBytes = 2000

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// --- get_event

// GetEventIn are get_event's arguments.
type GetEventIn struct {
	Seq uint64 `json:"seq" jsonschema:"the event's stream sequence (an event's seq in list_events or proposal_history)"`
	EventsWhere
}

// EventOut is one stored message as the stream holds it, beside its record
// in the event index.
type EventOut struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Time    time.Time           `json:"time"`
	Headers map[string][]string `json:"headers,omitempty"`
	MsgID   string              `json:"msg_id,omitempty"`
	// Size is the message's length in bytes and SHA256 the hex SHA-256 of
	// all of them (also when Truncated).
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
	// Text is the original bytes when they are UTF-8; DataBase64 the same
	// bytes in base64 when they are not.
	Text       string `json:"text,omitempty"`
	DataBase64 string `json:"data_base64,omitempty"`
	// Truncated: the message is longer than MaxEventBytes and Text or
	// DataBase64 holds its first MaxEventBytes bytes only.
	Truncated bool `json:"truncated"`
	// Event is the message's record in the event index; absent while the
	// projection has not folded it.
	Event *api.EventRecord `json:"event,omitempty"`
}

func (s *Server) toolGetEvent() {
	addTool(s, "get_event", "Get one stored event, raw",
		"One stored message exactly as the ledger's stream holds it: subject, stream time, headers (Nats-Msg-Id among them), the original bytes (text when UTF-8, else base64) and their SHA-256, beside its record in the event index (what the fold did with it). The evidence of what was actually sent. The message must be in space (default: the default space; * any): another space's is not_found.",
		func(ctx context.Context, in GetEventIn) (*EventOut, string, error) {
			if in.Seq == 0 {
				return nil, "", argError("seq", "seq is required: a stream sequence (an integer ≥ 1)")
			}
			var r api.RawEvent
			if err := s.c.Do(ctx, http.MethodGet, "/v1/events/"+strconv.FormatUint(in.Seq, 10), s.eventValues(in.EventsWhere), nil, "", false, &r); err != nil {
				return nil, "", err
			}
			out := &EventOut{Seq: r.Seq, Subject: r.Subject, Time: r.Time, Headers: r.Headers, MsgID: r.MsgID,
				Size: len(r.Data), SHA256: r.SHA256, Event: r.Event}
			data := r.Data
			if len(data) > MaxEventBytes {
				data, out.Truncated = data[:MaxEventBytes], true
			}
			if utf8.Valid(r.Data) {
				// Cut on a rune boundary.
				for len(data) > 0 && !utf8.Valid(data) {
					data = data[:len(data)-1]
				}
				out.Text = string(data)
			} else {
				out.DataBase64 = base64.StdEncoding.EncodeToString(data)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "Event at seq %d on %s, stored %s, %d bytes, sha256 %s", r.Seq, r.Subject, r.Time.Format(time.RFC3339), out.Size, r.SHA256)
			if out.Truncated {
				fmt.Fprintf(&b, " (bytes cut at %d)", MaxEventBytes)
			}
			if r.Event != nil {
				b.WriteString("\n")
				writeEvent(&b, r.Event)
			} else {
				b.WriteString("\nnot folded yet")
			}
			if t := out.Text; t != "" {
				if len(t) > maxTextBytes {
					t = strings.ToValidUTF8(t[:maxTextBytes], "") + " …(the whole message is in the structured result)"
				}
				b.WriteString("\n")
				b.WriteString(t)
			}
			return out, b.String(), nil
		})
}
