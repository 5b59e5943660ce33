package api

// The JSON bodies the ledger exchanges with its clients: the HTTP API
// (contract §7, §8) and the submit service (contract §8). Read responses
// embed the records of records.go: the proposal object of the API is
// exactly the projection's record.

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// AppendResult is the answer to one appended envelope: POST /v1/events
// (202), each line of an NDJSON POST, and a submit-service reply. On
// success ID, Seq and Duplicate are set; on failure only Error (and Line).
// Line is the 1-based input line of an NDJSON POST, 0 (absent) elsewhere.
type AppendResult struct {
	Line int `json:"line,omitempty"`
	// LastLine, on a refusal, says it answers every line from Line to
	// LastLine (an NDJSON answer compacts runs of identical refusals past
	// its first ones).
	LastLine  int    `json:"last_line,omitempty"`
	ID        string `json:"id,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	Duplicate bool   `json:"duplicate"`
	Error     *Error `json:"error,omitempty"`
}

// MarshalJSON writes a failure as {"line":N,"error":{...}} (with
// "last_line" when it answers a run of lines; no id, seq or
// duplicate) and a success as {"line":N,"id":..,"seq":..,"duplicate":..}.
func (r AppendResult) MarshalJSON() ([]byte, error) {
	type plain AppendResult
	if r.Error != nil {
		return json.Marshal(struct {
			Line     int    `json:"line,omitempty"`
			LastLine int    `json:"last_line,omitempty"`
			Error    *Error `json:"error"`
		}{r.Line, r.LastLine, r.Error})
	}
	return json.Marshal(plain(r))
}

// AppendNDJSON appends r as one NDJSON line (its JSON and a newline),
// the same bytes as a json.Encoder with SetEscapeHTML(false) writes: a
// success whose id needs no escaping is written by hand (the answer of
// every line of an NDJSON append), anything else through MarshalJSON.
func (r AppendResult) AppendNDJSON(b []byte) []byte {
	if r.Error == nil && r.LastLine == 0 && plainJSONString(r.ID) {
		b = append(b, '{')
		if r.Line != 0 {
			b = append(b, `"line":`...)
			b = strconv.AppendInt(b, int64(r.Line), 10)
			b = append(b, ',')
		}
		if r.ID != "" {
			b = append(b, `"id":"`...)
			b = append(b, r.ID...)
			b = append(b, `",`...)
		}
		if r.Seq != 0 {
			b = append(b, `"seq":`...)
			b = strconv.AppendUint(b, r.Seq, 10)
			b = append(b, ',')
		}
		b = append(b, `"duplicate":`...)
		b = strconv.AppendBool(b, r.Duplicate)
		return append(b, '}', '\n')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil { // unreachable: every field marshals
		return append(b, '{', '}', '\n')
	}
	return append(b, buf.Bytes()...)
}

// plainJSONString reports whether s is printable ASCII without '"', '\\'
// or the HTML characters MarshalJSON's json.Marshal escapes: its JSON
// string is its bytes in quotes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// History is GET /v1/proposals/{id}/history.
type History struct {
	ID     string         `json:"id"`
	Space  string         `json:"space"`
	Events []HistoryEntry `json:"events"`
}

// List is GET /v1/proposals.
type List struct {
	Proposals  []*Proposal `json:"proposals"`
	NextCursor string      `json:"next_cursor"`
}

// Status is GET /v1/status.
type Status struct {
	StreamSeq    uint64 `json:"stream_seq"`
	ProjectedSeq uint64 `json:"projected_seq"`
	Lag          uint64 `json:"lag"`
	// LogProblem says what is wrong between the log and the projection
	// (the stream deleted or recreated, history removed, the checkpoint
	// beyond the log, a setting the ledger cannot use); while it is set
	// the ledger is not ready and folds nothing.
	LogProblem string `json:"log_problem,omitempty"`
	// LogDamage is the first damaged or missing sequence of the log
	// (contract §16); LogProblem then says it in words.
	LogDamage *LogDamage `json:"log_damage,omitempty"`
	// SigningStopped says why checkpoints stopped at a size.
	SigningStopped *SigningStopped `json:"signing_stopped,omitempty"`
	// ProjectionHeld says the projection is held at a sequence because
	// the next one is missing from the stream (it resumes by itself once
	// that sequence is restored).
	ProjectionHeld *ProjectionHeld `json:"projection_held,omitempty"`
	// Scrub is the scrub's progress (GET /v1/status only).
	Scrub *Scrub `json:"scrub,omitempty"`
	// Import is the import boundary (GET /v1/status only): what an
	// outside verifier must know to rebuild an imported log's leaves.
	Import *ImportBoundary `json:"import,omitempty"`
	// Consumers are the stream's consumers (GET /v1/status only, when the
	// ledger can list them): the projectors' durables, rebuilds and
	// other readers, with how far each has got.
	Consumers []Consumer `json:"consumers,omitempty"`
	// Witnessing is the witnesses the ledger asks to cosign its
	// checkpoints, when it has any (GET /v1/status only).
	Witnessing *Witnessing `json:"witnessing,omitempty"`
}

// Consumer is one consumer of the LEDGER stream as GET /v1/status shows it.
type Consumer struct {
	Name string `json:"name"`
	// Durable is false for an ephemeral (ordered) consumer.
	Durable bool `json:"durable"`
	// Delivered is the last stream sequence delivered; AckFloor the
	// highest sequence below which every message is acknowledged.
	Delivered uint64 `json:"delivered"`
	AckFloor  uint64 `json:"ack_floor"`
	// Pending is how many messages are left to deliver; AckPending how
	// many were delivered and await an ack; Redelivered how many were
	// delivered again.
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
}

// Ready is GET /readyz: Status plus the verdict (and, with 503, Error).
type Ready struct {
	Ready bool   `json:"ready"`
	Bound uint64 `json:"bound"`
	Status
	Error *Error `json:"error,omitempty"`
}

// Health is GET /healthz.
type Health struct {
	Status string `json:"status"`
}

// Addr is the content of <data>/serve.addr.json, written by `ledger serve`
// once it accepts requests and removed on a clean shutdown.
type Addr struct {
	HTTP string `json:"http"`
	NATS string `json:"nats"`
	// NATSMonitor is the embedded NATS server's monitoring URL
	// (--nats-monitor), absent when it serves none.
	NATSMonitor string `json:"nats_monitor,omitempty"`
}
