package projections

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
	"github.com/mewledger/ledger/projections/fold"
)

// Fast JSON encoders for the records the fold writes on every commit:
// proposals, history entries and event-id index entries. They produce
// exactly the bytes json.Marshal produces (the stored values must not depend
// on which encoder wrote them: GetRaw promises json.Marshal's bytes, and a
// store written before this code must compare equal to a rebuild), without
// reflection: json.Marshal was 16% of a rebuild's CPU, and most of its
// garbage. Whatever they do not handle exactly (kernel proposals, times
// outside years 0..9999, params that json.Marshal would re-compact or
// HTML-escape) falls back to json.Marshal. TestEncodersMatchMarshal and
// FuzzEncoders compare the two.

// appendMarshalProposal appends json.Marshal(p) to b.
func appendMarshalProposal(b []byte, p *api.Proposal) ([]byte, error) {
	if out, ok := appendProposal(b, p); ok {
		return out, nil
	}
	v, err := json.Marshal(p)
	return append(b, v...), err
}

// appendMarshalHistory appends json.Marshal(h) to b.
func appendMarshalHistory(b []byte, h *api.HistoryEntry) ([]byte, error) {
	if out, ok := appendHistory(b, h); ok {
		return out, nil
	}
	v, err := json.Marshal(h)
	return append(b, v...), err
}

// jsonWriter appends one JSON object's members.
type jsonWriter struct {
	b     []byte
	first bool
	ok    bool // false once a value needs json.Marshal
}

func (w *jsonWriter) key(name string) {
	if w.first {
		w.first = false
	} else {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, name...) // member names are plain ASCII
	w.b = append(w.b, '"', ':')
}

func (w *jsonWriter) str(name, v string) {
	w.key(name)
	w.b = canon.AppendStringHTML(w.b, v)
}

func (w *jsonWriter) strOmit(name, v string) {
	if v != "" {
		w.str(name, v)
	}
}

func (w *jsonWriter) u64(name string, v uint64) {
	w.key(name)
	w.b = strconv.AppendUint(w.b, v, 10)
}

func (w *jsonWriter) u64Omit(name string, v uint64) {
	if v != 0 {
		w.u64(name, v)
	}
}

func (w *jsonWriter) i64(name string, v int64) {
	w.key(name)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *jsonWriter) boolean(name string, v bool) {
	w.key(name)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jsonWriter) time(name string, t time.Time) {
	w.key(name)
	// time.Time.MarshalJSON is RFC 3339 with nanoseconds; it refuses
	// years outside 0..9999 and offsets of a day or more.
	if y := t.Year(); y < 0 || y > 9999 {
		w.ok = false
		return
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		w.ok = false
		return
	}
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

// strings writes a []string member: null when nil, as json.Marshal does.
func (w *jsonWriter) strings(name string, v []string) {
	w.key(name)
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = canon.AppendStringHTML(w.b, s)
	}
	w.b = append(w.b, ']')
}

func (w *jsonWriter) stringsOmit(name string, v []string) {
	if len(v) > 0 {
		w.strings(name, v)
	}
}

// raw writes a json.RawMessage member. json.Marshal writes nil as null and
// re-compacts a RawMessage with HTML escaping: a value with white space or
// an HTML-sensitive character is left to it.
func (w *jsonWriter) raw(name string, v json.RawMessage) {
	w.key(name)
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	if len(v) == 0 || !plainRaw(v) {
		w.ok = false
		return
	}
	w.b = append(w.b, v...)
}

// plainRaw reports whether json.Marshal would copy the RawMessage v as it
// is: no white space to compact, nothing to HTML-escape (<, >, &, and
// U+2028/U+2029, which start with 0xE2).
func plainRaw(v []byte) bool {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\r', '\n', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

func newWriter(b []byte) jsonWriter {
	return jsonWriter{b: append(b, '{'), first: true, ok: true}
}

func (w *jsonWriter) end() ([]byte, bool) {
	return append(w.b, '}'), w.ok
}

// appendProposal appends json.Marshal(p); false when p needs json.Marshal.
func appendProposal(b []byte, p *api.Proposal) ([]byte, bool) {
	if p.Kernel != nil || p.HasFormFields() {
		return b, false // rare: json.Marshal
	}
	w := newWriter(b)
	w.str("id", p.ID)
	w.str("space", p.Space)
	w.str("state", string(p.State))
	w.str("proposer", p.Proposer)
	w.strings("to", p.To)
	w.str("method", p.Method)
	w.raw("params", p.Params)
	w.str("dialect", p.Dialect)
	w.str("kind", p.Kind)
	w.strOmit("context", p.Context)
	w.u64("created_seq", p.CreatedSeq)
	w.time("created_at", p.CreatedAt)
	w.u64("updated_seq", p.UpdatedSeq)
	w.time("updated_at", p.UpdatedAt)
	w.str("decided_by", p.DecidedBy)
	w.str("decided_event", p.DecidedEvent)
	w.u64Omit("decided_seq", p.DecidedSeq)
	w.str("reason", p.Reason)
	w.key("rejections")
	if p.Rejections == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i := range p.Rejections {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			r := &p.Rejections[i]
			o := newWriter(w.b)
			o.str("event", r.Event)
			o.u64("seq", r.Seq)
			o.str("from", r.From)
			o.str("reason", r.Reason)
			o.strOmit("explanation", r.Explanation)
			o.boolean("late", r.Late)
			w.b, _ = o.end()
		}
		w.b = append(w.b, ']')
	}
	w.key("fulfillments")
	if p.Fulfillments == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i := range p.Fulfillments {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			f := &p.Fulfillments[i]
			o := newWriter(w.b)
			o.str("event", f.Event)
			o.u64("seq", f.Seq)
			o.str("from", f.From)
			o.boolean("late", f.Late)
			o.strOmit("outcome", f.Outcome)
			o.strOmit("response", f.Response)
			o.stringsOmit("anomalies", f.Anomalies)
			o.stringsOmit("to", f.To)
			if len(f.Responses) > 0 {
				o.key("responses")
				o.b = append(o.b, '[')
				for j := range f.Responses {
					if j > 0 {
						o.b = append(o.b, ',')
					}
					r := &f.Responses[j]
					ro := newWriter(o.b)
					ro.str("event", r.Event)
					ro.u64("seq", r.Seq)
					ro.str("from", r.From)
					ro.strOmit("outcome", r.Outcome)
					o.b, _ = ro.end()
				}
				o.b = append(o.b, ']')
			}
			w.b, _ = o.end()
		}
		w.b = append(w.b, ']')
	}
	if wd := p.Withdrawal; wd != nil {
		w.key("withdrawal")
		o := newWriter(w.b)
		o.str("event", wd.Event)
		o.u64("seq", wd.Seq)
		o.str("from", wd.From)
		o.str("reason", wd.Reason)
		o.strOmit("explanation", wd.Explanation)
		w.b, _ = o.end()
	}
	w.strings("anomalies", p.Anomalies)
	w.i64("events", int64(p.Events))
	if p.ExpiresAt != nil {
		w.time("expires_at", *p.ExpiresAt)
	}
	w.str("digest", p.Digest)
	if len(p.Approvals) > 0 {
		w.key("approvals")
		w.b = append(w.b, '[')
		for i := range p.Approvals {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			a := &p.Approvals[i]
			o := newWriter(w.b)
			o.str("event", a.Event)
			o.u64("seq", a.Seq)
			o.str("from", a.From)
			o.strOmit("reason", a.Reason)
			o.boolean("counted", a.Counted)
			if a.Late {
				o.boolean("late", true)
			}
			o.strOmit("why", a.Why)
			w.b, _ = o.end()
		}
		w.b = append(w.b, ']')
	}
	if p.Approved != nil {
		w.boolean("approved", *p.Approved)
	}
	if len(p.Targets) > 0 {
		w.key("targets")
		w.b = append(w.b, '[')
		for i := range p.Targets {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			o := newWriter(w.b)
			o.str("id", p.Targets[i].ID)
			o.strings("sources", p.Targets[i].Sources)
			w.b, _ = o.end()
		}
		w.b = append(w.b, ']')
	}
	return w.end()
}

// appendHistory appends json.Marshal(h); false when h needs json.Marshal.
func appendHistory(b []byte, h *api.HistoryEntry) ([]byte, bool) {
	w := newWriter(b)
	w.u64("seq", h.Seq)
	w.str("id", h.ID)
	w.str("type", h.Type)
	w.str("kind", h.Kind)
	w.str("from", h.From)
	w.time("at", h.At)
	w.str("effect", string(h.Effect))
	w.strOmit("reason", h.Reason)
	w.strOmit("code", h.Code)
	w.strOmit("detail", h.Detail)
	w.stringsOmit("anomalies", h.Anomalies)
	w.strOmit("target", h.Target)
	w.strOmit("text", h.Text)
	w.strOmit("outcome", h.Outcome)
	w.u64Omit("resolved_seq", h.ResolvedSeq)
	w.strOmit("form", h.Form)
	w.strOmit("note", h.Note)
	w.strOmit("status", h.Status)
	return w.end()
}

// appendEventRef appends json.Marshal(r).
func appendEventRef(b []byte, r *fold.EventRef) []byte {
	w := newWriter(b)
	w.u64("seq", r.Seq)
	w.str("type", string(r.Type))
	w.str("digest", r.Digest)
	w.str("from", r.From)
	w.str("status", string(r.Status))
	w.stringsOmit("proposals", r.Proposals)
	out, _ := w.end()
	return out
}
