package ledger

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// KindGap is the kind of the event the ledger writes when a bridge lost its
// connection to a recorded space (contract §3, §14): whatever the space carried
// while it was disconnected may be missing from the log.
const KindGap = "ledger/gap"

// Gap describes one recording gap of a bridge. Every time is UTC.
type Gap struct {
	// Bridge is the bridge's participant name in the recorded space; it is
	// the subject key of the gap event.
	Bridge string `json:"bridge"`
	// MEWSpace is the recorded MEW space's id, Gateway the address the
	// bridge connects to.
	MEWSpace string `json:"mew_space,omitempty"`
	Gateway  string `json:"gateway,omitempty"`
	// LastEnvelope and LastSeq are the id and stream sequence of the last
	// envelope the ledger stored from the bridge before the hole ("" and
	// 0 when it had stored none): the window starts after it.
	LastEnvelope string `json:"last_envelope,omitempty"`
	LastSeq      uint64 `json:"last_seq,omitempty"`
	// DisconnectedAt is the window's start in time: when the bridge
	// received LastEnvelope (or, before it had stored any, when it
	// joined), not when it noticed the loss (NoticedAt): anything the
	// space carried after it may be missing. ReconnectedAt is when it was
	// joined again (zero when the bridge stopped while the hole was
	// open). The window ends at the first envelope the ledger stores from
	// the bridge after this gap event.
	DisconnectedAt time.Time `json:"disconnected_at"`
	ReconnectedAt  time.Time `json:"reconnected_at,omitzero"`
	// NoticedAt is when the bridge noticed the loss (the socket's error,
	// the eviction, the full backlog, the restart after a crash).
	NoticedAt time.Time `json:"noticed_at,omitzero"`
	// Reason says why the connection ended (e.g. "evicted: another
	// participant joined as <name>", "read: EOF").
	Reason string `json:"reason,omitempty"`
	// Session is the bridge session (one run of a bridge process) whose
	// hole this is; Dropped counts the envelopes the bridge received and
	// dropped inside the window (a full backlog), when it knows.
	Session string `json:"session,omitempty"`
	Dropped int    `json:"dropped,omitempty"`
}

// GapID is the id of a gap event: "gap:<bridge>/<disconnected_at as Unix
// nanoseconds>". A bridge that reports the same gap twice (a retry) writes
// one event. A time outside what Unix nanoseconds can hold (before 1678,
// after 2262; ParseGap refuses them) has "<Unix seconds>.<nanoseconds>"
// instead, so that two gaps never share an id.
func GapID(g Gap) string {
	if !InUnixNanoRange(g.DisconnectedAt) {
		return fmt.Sprintf("gap:%s/%d.%09d", g.Bridge, g.DisconnectedAt.Unix(), g.DisconnectedAt.Nanosecond())
	}
	return fmt.Sprintf("gap:%s/%d", g.Bridge, g.DisconnectedAt.UnixNano())
}

// The times Unix nanoseconds (an int64) can hold.
var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// InUnixNanoRange reports whether t.UnixNano is defined: 1677-09-21 to
// 2262-04-11.
func InUnixNanoRange(t time.Time) bool {
	return !t.Before(minUnixNano) && !t.After(maxUnixNano)
}

// GapEnvelope returns the raw mew/v0.4 envelope of a gap:
//
//	{"protocol":"mew/v0.4","id":"gap:<bridge>/<ns>","from":"ledger","kind":"ledger/gap","payload":{...Gap}}
//
// It is appended with sender LedgerSender under the subject key g.Bridge.
// It fails when g has no bridge or no disconnection time.
func GapEnvelope(g Gap) ([]byte, error) {
	if g.Bridge == "" {
		return nil, fmt.Errorf("ledger: gap without a bridge name")
	}
	if g.DisconnectedAt.IsZero() {
		return nil, fmt.Errorf("ledger: gap of %q without a disconnection time", g.Bridge)
	}
	g.DisconnectedAt = g.DisconnectedAt.UTC()
	if !g.ReconnectedAt.IsZero() {
		g.ReconnectedAt = g.ReconnectedAt.UTC()
	}
	env := struct {
		Protocol string `json:"protocol"`
		ID       string `json:"id"`
		From     string `json:"from"`
		Kind     string `json:"kind"`
		Payload  Gap    `json:"payload"`
	}{DialectMEW04, GapID(g), LedgerSender, KindGap, g}
	return json.Marshal(env)
}
