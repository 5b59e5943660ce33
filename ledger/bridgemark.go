package ledger

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/mewledger/ledger/api"
)

// HeaderBridge is the header a bridge sets on its appends (an HTTP
// request header of POST /v1/events, a NATS header of a submit request,
// BodyOptions.Bridge in process), and the ledger keeps on every message it
// stores for them (contract §14): a BridgeMark. The fold keeps, per bridge,
// the last envelope stored with it, so that the ledger knows each
// bridge's sessions from the log alone (rebuild-identical).
const HeaderBridge = "Ledger-Bridge"

// MaxBridgeMarkBytes bounds a HeaderBridge value.
const MaxBridgeMarkBytes = 1024

// BridgeMark names the bridge session an envelope came through: the
// bridge's participant, the MEW space it records, the session (one run of
// the bridge process), and when the bridge received the envelope (for a
// batch, the first envelope of the batch: never later than the truth).
//
// Prev and Dups are what the session saw that left nothing in the log
// (contract §14 "Several recorders"): Prev is the stream sequence of the
// last envelope the session received and the ledger answered (stored, or
// duplicate of the message at that sequence) before this batch, since the
// session last joined (0: none, or not reported); Dups counts the
// envelopes of the session so far that the ledger answered as duplicates.
// A recorder that sets Prev lets the ledger know it recorded the windows
// other recorders stored alone. History says the session follows a
// gateway's envelope-history.jsonl (--history) rather than the live
// space: what it stores fills what the live recorders missed, at the
// log's end, so only what it was answered duplicate (Prev, a gap's last
// envelope) places it in the space's traffic.
type BridgeMark struct {
	Bridge   string
	MEWSpace string
	Session  string
	Received time.Time
	Prev     uint64
	Dups     int64
	History  bool
}

// String encodes the mark as a HeaderBridge value: a URL query,
// b=<bridge>&m=<mew space>&s=<session>&r=<unix nanoseconds>, with
// p=<sequence> and d=<count> when not zero, and h=1 for History.
func (m BridgeMark) String() string {
	v := url.Values{"b": {m.Bridge}, "m": {m.MEWSpace}, "s": {m.Session}}
	if !m.Received.IsZero() {
		v.Set("r", strconv.FormatInt(m.Received.UnixNano(), 10))
	}
	if m.Prev > 0 {
		v.Set("p", strconv.FormatUint(m.Prev, 10))
	}
	if m.Dups > 0 {
		v.Set("d", strconv.FormatInt(m.Dups, 10))
	}
	if m.History {
		v.Set("h", "1")
	}
	return v.Encode()
}

// ParseBridgeMark decodes a HeaderBridge value. The error is a
// *RefusalError naming the header.
func ParseBridgeMark(s string) (BridgeMark, error) {
	bad := func(format string, args ...any) (BridgeMark, error) {
		return BridgeMark{}, refuse(api.CodeBadValue, HeaderBridge, "%s: %s", HeaderBridge, fmt.Sprintf(format, args...))
	}
	if len(s) > MaxBridgeMarkBytes {
		return bad("%d bytes, over the limit of %d", len(s), MaxBridgeMarkBytes)
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return bad("not b=BRIDGE&m=MEW_SPACE&s=SESSION&r=UNIX_NS: %v", err)
	}
	m := BridgeMark{Bridge: v.Get("b"), MEWSpace: v.Get("m"), Session: v.Get("s")}
	switch {
	case m.Bridge == "" || len(m.Bridge) > MaxIDBytes:
		return bad("b (the bridge's participant) must be 1..%d bytes", MaxIDBytes)
	case m.Bridge == LedgerSender:
		return bad("b %q is the ledger's own sender, not a bridge", LedgerSender)
	case len(m.MEWSpace) > MaxIDBytes:
		return bad("m (the MEW space) is over %d bytes", MaxIDBytes)
	case m.Session == "" || len(m.Session) > MaxIDBytes:
		return bad("s (the session) must be 1..%d bytes", MaxIDBytes)
	}
	if r := v.Get("r"); r != "" {
		ns, err := strconv.ParseInt(r, 10, 64)
		if err != nil || ns <= 0 {
			return bad("r must be the receive time in Unix nanoseconds, not %q", r)
		}
		m.Received = time.Unix(0, ns).UTC()
	}
	if p := v.Get("p"); p != "" {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return bad("p must be the sequence of the last envelope the session saw, not %q", p)
		}
		m.Prev = n
	}
	if d := v.Get("d"); d != "" {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return bad("d must be the count of duplicates the session was answered, not %q", d)
		}
		m.Dups = n
	}
	switch h := v.Get("h"); h {
	case "", "0":
	case "1":
		m.History = true
	default:
		return bad("h must be 1 (a --history follower) or absent, not %q", h)
	}
	return m, nil
}
