package mewgw

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// The gateway's own log. MEW v0.11.0's gateway writes every envelope it
// handles to .mew/logs/envelope-history.jsonl (gateway.ts
// createGatewayLogger): a "received" record naming the socket that sent
// it (participant), then one "delivered" record per recipient, each with
// the envelope as delivered and metadata.source_participant. A test turns
// the same log on with RecordHistory, so that a `ledger bridge mew
// --history` follower can record the stand-in's space as it records a
// real one (see testdata/mew-v0.11/gateway-logs for the real records).

// historyLog is the open envelope history of a gateway.
type historyLog struct {
	mu sync.Mutex
	w  io.WriteCloser
}

// histRecord is one line of envelope-history.jsonl.
type histRecord struct {
	Timestamp   string          `json:"timestamp"`
	Event       string          `json:"event"`
	ID          string          `json:"id"`
	Envelope    json.RawMessage `json:"envelope"`
	Participant string          `json:"participant"`
	SpaceID     string          `json:"space_id"`
	Direction   string          `json:"direction"`
	Transport   string          `json:"transport"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
}

// RecordHistory makes the gateway append its envelope history to path
// (created if needed) from now on: for every envelope Broadcast relays,
// a received record whose participant is the envelope's from (the test's
// stand-in for the sending socket), then a delivered record per
// recipient, in delivery order. Frames that are not JSON envelopes with
// an id (stream data, error frames) are not logged, as on the real
// gateway. Close closes the file.
func (g *Gateway) RecordHistory(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("mewgw: history: %w", err)
	}
	g.mu.Lock()
	old := g.history
	g.history = &historyLog{w: f}
	g.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

// log writes the records of one broadcast: received, then delivered to
// each of to.
func (h *historyLog) log(space string, frame []byte, to []string) {
	var env struct {
		ID   string `json:"id"`
		From string `json:"from"`
		Kind string `json:"kind"`
	}
	if len(frame) == 0 || frame[0] != '{' || json.Unmarshal(frame, &env) != nil || env.ID == "" {
		return
	}
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	var buf []byte
	add := func(r histRecord) {
		b, err := json.Marshal(r)
		if err == nil {
			buf = append(append(buf, b...), '\n')
		}
	}
	add(histRecord{Timestamp: ts, Event: "received", ID: env.ID, Envelope: frame, Participant: env.From, SpaceID: space,
		Direction: "inbound", Transport: "websocket"})
	for _, p := range to {
		add(histRecord{Timestamp: ts, Event: "delivered", ID: env.ID, Envelope: frame, Participant: p, SpaceID: space,
			Direction: "outbound", Transport: "websocket", Metadata: map[string]any{"source_participant": env.From}})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		_, _ = h.w.Write(buf) // one write per broadcast: a follower never reads half of it for long
	}
}

func (h *historyLog) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		_ = h.w.Close()
		h.w = nil
	}
}
