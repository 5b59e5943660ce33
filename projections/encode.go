package projections

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger/canon"
	"github.com/mewledger/ledger/projections/fold"
)

// Fast JSON encoders for the records the fold writes on every commit.
//
// A proposal is stored in exactly the bytes the HTTP API serves for it
// (contract §7; GET /v1/proposals/{id} and the list route copy them): the
// bytes an encoding/json Encoder with SetEscapeHTML(false) writes for the
// proposal with its list members normalized ([] rather than null for to,
// rejections, fulfillments and anomalies), without the trailing newline.
// appendServedProposal writes them without reflection (json.Marshal was 16%
// of a rebuild's CPU, and most of its garbage); whatever it does not handle
// exactly (kernel proposals, form fields, times outside years 0..9999,
// params the Encoder would re-compact) falls back to the Encoder.
// TestEncodersMatchMarshal and FuzzEncoders compare the two.
//
// History entries and event refs are stored binary (encode_bin.go); their
// JSON encoders here produce json.Marshal's bytes.

// appendServedProposal appends the served encoding of p to b.
func appendServedProposal(b []byte, p *api.Proposal) ([]byte, error) {
	if out, ok := appendProposal(b, p); ok {
		return out, nil
	}
	v, err := encodeServed(p)
	return append(b, v...), err
}

// ServedProposal returns the bytes the HTTP API serves for p (and the store
// holds): see appendServedProposal.
func ServedProposal(p *api.Proposal) ([]byte, error) {
	return appendServedProposal(make([]byte, 0, 512+len(p.Params)), p)
}

// encodeServed is the reference encoding: an Encoder without HTML escaping
// of p with its list members normalized.
func encodeServed(p *api.Proposal) ([]byte, error) {
	q := *p
	if q.To == nil {
		q.To = []string{}
	}
	if q.Rejections == nil {
		q.Rejections = []api.Rejection{}
	}
	if q.Fulfillments == nil {
		q.Fulfillments = []api.Fulfillment{}
	}
	if q.Anomalies == nil {
		q.Anomalies = []string{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&q); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
	b      []byte
	first  bool
	ok     bool // false once a value needs the reference encoder
	served bool // strings as the API's Encoder writes them (no HTML escaping)
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
	w.b = w.appendString(w.b, v)
}

func (w *jsonWriter) appendString(b []byte, v string) []byte {
	if w.served {
		return canon.AppendStringNoHTML(b, v)
	}
	return canon.AppendStringHTML(b, v)
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
	w.list(v)
}

// strList writes a normalized []string member: [] when nil.
func (w *jsonWriter) strList(name string, v []string) {
	w.key(name)
	w.list(v)
}

func (w *jsonWriter) list(v []string) {
	w.b = append(w.b, '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = w.appendString(w.b, s)
	}
	w.b = append(w.b, ']')
}

func (w *jsonWriter) stringsOmit(name string, v []string) {
	if len(v) > 0 {
		w.strings(name, v)
	}
}

// raw writes a json.RawMessage member. An Encoder writes nil as null and
// re-compacts a RawMessage (without HTML escaping when served): a value
// with white space is left to it.
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

// plainRaw reports whether the API's Encoder would copy the RawMessage v
// as it is: no white space to compact (it does not HTML-escape).
func plainRaw(v []byte) bool {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\r', '\n':
			return false
		}
	}
	return true
}

func newWriter(b []byte) jsonWriter {
	return jsonWriter{b: append(b, '{'), first: true, ok: true}
}

func newServedWriter(b []byte) jsonWriter {
	return jsonWriter{b: append(b, '{'), first: true, ok: true, served: true}
}

func (w *jsonWriter) end() ([]byte, bool) {
	return append(w.b, '}'), w.ok
}

// appendProposal appends the served encoding of p; false when p needs the
// reference encoder.
func appendProposal(b []byte, p *api.Proposal) ([]byte, bool) {
	if p.Kernel != nil || p.HasFormFields() {
		return b, false // rare: the reference encoder
	}
	w := newServedWriter(b)
	w.str("id", p.ID)
	w.str("space", p.Space)
	w.str("state", string(p.State))
	w.str("proposer", p.Proposer)
	w.strList("to", p.To)
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
	{
		w.b = append(w.b, '[')
		for i := range p.Rejections {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			r := &p.Rejections[i]
			o := newServedWriter(w.b)
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
	{
		w.b = append(w.b, '[')
		for i := range p.Fulfillments {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			f := &p.Fulfillments[i]
			o := newServedWriter(w.b)
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
					ro := newServedWriter(o.b)
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
		o := newServedWriter(w.b)
		o.str("event", wd.Event)
		o.u64("seq", wd.Seq)
		o.str("from", wd.From)
		o.str("reason", wd.Reason)
		o.strOmit("explanation", wd.Explanation)
		w.b, _ = o.end()
	}
	w.strList("anomalies", p.Anomalies)
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
			o := newServedWriter(w.b)
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
			o := newServedWriter(w.b)
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
