package api

import (
	"slices"
	"strings"
	"time"
)

// EventEntry is one history entry the fold wrote for an event: the id it
// is filed under (Key: a proposal id, the id an orphan waits for, or the
// key of an unattributable event) and what the event did there.
type EventEntry struct {
	Key         string   `json:"key"`
	Effect      Effect   `json:"effect"`
	Code        string   `json:"code,omitempty"`
	Detail      string   `json:"detail,omitempty"`
	Anomalies   []string `json:"anomalies,omitempty"`
	Target      string   `json:"target,omitempty"`
	Outcome     string   `json:"outcome,omitempty"`
	ResolvedSeq uint64   `json:"resolved_seq,omitempty"`
}

// EventRecord is one stored message of the ledger as the event index keeps
// it (GET /v1/events).
type EventRecord struct {
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	Space  string    `json:"space"`
	Key    string    `json:"key,omitempty"` // the subject's correlation key
	ID     string    `json:"id,omitempty"`
	Type   string    `json:"type,omitempty"`
	Kind   string    `json:"kind,omitempty"`
	Form   string    `json:"form,omitempty"`
	From   string    `json:"from,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Method string    `json:"method,omitempty"`
	// Tool is params.name of a tools/call; Arg the call's main argument
	// (see mainArg), cut to 200 bytes.
	Tool   string `json:"tool,omitempty"`
	Arg    string `json:"arg,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Effect is the most telling effect of the entries (effectRank);
	// Effects all of them, distinct, in that order.
	Effect    Effect   `json:"effect"`
	Effects   []Effect `json:"effects"`
	Proposals []string `json:"proposals,omitempty"`
	Anomalies []string `json:"anomalies,omitempty"`
	// Code and Detail are the first entry's (by effect rank) that has one:
	// the fold's reason for what the event did.
	Code    string       `json:"code,omitempty"`
	Detail  string       `json:"detail,omitempty"`
	Entries []EventEntry `json:"entries"`
}

// EventPage is one page of Events.
type EventPage struct {
	Events     []EventRecord `json:"events"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// RawEvent is one stored message of the ledger as GET /v1/events/{seq}
// answers it: the message as JetStream holds it (subject, headers, stream
// time, original bytes) beside its record in the event index.
type RawEvent struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Time    time.Time           `json:"time"`
	Headers map[string][]string `json:"headers,omitempty"`
	// Data is the original bytes (base64 in JSON); Text the same bytes
	// when they are valid UTF-8 (absent otherwise).
	Data []byte `json:"data"`
	Text string `json:"text,omitempty"`
	// SHA256 is the hex SHA-256 of Data; MsgID the Nats-Msg-Id header.
	SHA256 string `json:"sha256"`
	MsgID  string `json:"msg_id,omitempty"`
	// Event is the message's record in the event index (nil when the
	// projection has not folded it yet).
	Event *EventRecord `json:"event,omitempty"`
}

// effectRank orders effects from the most telling for an auditor.
var effectRank = []Effect{EffectInvalid, EffectUnauthorized, EffectLate, EffectOrphan, EffectDuplicate,
	EffectApplied, EffectRecorded, EffectIgnored}

func rankOf(e Effect) int {
	if i := slices.Index(effectRank, e); i >= 0 {
		return i
	}
	return len(effectRank)
}

// Clone returns a deep copy of r.
func (r *EventRecord) Clone() *EventRecord {
	c := *r
	c.Entries = make([]EventEntry, len(r.Entries))
	for i, e := range r.Entries {
		e.Anomalies = slices.Clone(e.Anomalies)
		c.Entries[i] = e
	}
	c.Effects = slices.Clone(r.Effects)
	c.Proposals = slices.Clone(r.Proposals)
	c.Anomalies = slices.Clone(r.Anomalies)
	return &c
}

// Derive sorts the entries by key and recomputes the summary fields
// (Effect, Effects, Proposals, Anomalies, Code, Detail) from them.
func (r *EventRecord) Derive() {
	slices.SortFunc(r.Entries, func(x, y EventEntry) int { return strings.Compare(x.Key, y.Key) })
	r.Effects, r.Proposals, r.Anomalies = r.Effects[:0], r.Proposals[:0], r.Anomalies[:0]
	if r.Effects == nil {
		r.Effects = []Effect{}
	}
	r.Effect, r.Code, r.Detail = "", "", ""
	best := len(effectRank) + 1
	for _, e := range r.Entries {
		if !slices.Contains(r.Effects, e.Effect) {
			r.Effects = append(r.Effects, e.Effect)
		}
		r.Proposals = append(r.Proposals, e.Key)
		for _, an := range e.Anomalies {
			if !slices.Contains(r.Anomalies, an) {
				r.Anomalies = append(r.Anomalies, an)
			}
		}
		if rk := rankOf(e.Effect); rk < best {
			best = rk
			r.Effect = e.Effect
			r.Code, r.Detail = e.Code, e.Detail
		}
	}
	slices.SortFunc(r.Effects, func(x, y Effect) int { return rankOf(x) - rankOf(y) })
	slices.Sort(r.Anomalies)
	r.Proposals = slices.Compact(r.Proposals)
}
