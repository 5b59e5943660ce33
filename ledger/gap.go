package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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

// GapID is the id of a gap event:
//
//	gap:<bridge>/<disconnected_at as Unix nanoseconds>/<window hash>
//
// where <window hash> is 32 hex digits (the first 16 bytes of a SHA-256)
// of the gap's identity: its recorder (Bridge), MEW space, session, and
// window (the last envelope stored before it, LastEnvelope and LastSeq,
// and its bounds in time, DisconnectedAt and ReconnectedAt). Two real
// gaps of one recorder never share an id, whatever their times: a
// restarted bridge that stored nothing new (same last envelope, same
// start) has another session, or another window end. A bridge that
// reports the same gap twice (a retry) writes one event. A time outside
// what Unix nanoseconds can hold (before 1678, after 2262; ParseGap
// refuses them) has "<Unix seconds>.<nanoseconds>" instead. The reason,
// the noticing time and the drop count are not part of the identity.
// Logs written before this format have "gap:<bridge>/<ns>" ids; they
// still decode (MaxGapIDBytes holds both).
func GapID(g Gap) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
	}
	field("mewledger gap id v2")
	field(g.Bridge)
	field(g.MEWSpace)
	field(g.Session)
	field(g.LastEnvelope)
	field(strconv.FormatUint(g.LastSeq, 10))
	field(at(g.DisconnectedAt))
	field(at(g.ReconnectedAt))
	sum := h.Sum(nil)
	start := strconv.FormatInt(g.DisconnectedAt.UnixNano(), 10)
	if !InUnixNanoRange(g.DisconnectedAt) {
		start = fmt.Sprintf("%d.%09d", g.DisconnectedAt.Unix(), g.DisconnectedAt.Nanosecond())
	}
	return "gap:" + g.Bridge + "/" + start + "/" + hex.EncodeToString(sum[:16])
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
//	{"protocol":"mew/v0.4","id":"gap:<bridge>/<ns>/<hash>","from":"ledger","kind":"ledger/gap","payload":{...Gap}}
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
