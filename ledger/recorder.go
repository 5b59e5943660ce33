package ledger

import (
	"time"
)

// Refusal codes of a recorder's marks and gap reports (contract §14,
// "Several recorders": only a recorder can speak for itself).
const (
	// CodeNotRecorder: the caller may not speak for the bridge a mark or
	// gap report names (HTTP 403).
	CodeNotRecorder = "not_recorder"
	// CodeClockAhead: a mark's receive time or a gap report's time is
	// later than the ledger's own clock plus MaxClockAhead.
	CodeClockAhead = "clock_ahead"
	// CodeGapAhead: a gap report names, as the last envelope stored from
	// the bridge, a sequence the log does not hold yet: it would end the
	// bridge's session after envelopes never stored (and so hide a
	// crash's hole).
	CodeGapAhead = "gap_ahead"
)

// MaxClockAhead is how far ahead of the ledger's clock a recorder's clock
// may be: a mark's receive time or a gap's time later than the ledger's
// now plus this is refused (CodeClockAhead). It is checked when the
// ledger appends (never in the fold, which reads no clock).
const MaxClockAhead = time.Minute

// CheckMarkClock refuses a mark received after now+MaxClockAhead.
func CheckMarkClock(m BridgeMark, now time.Time) error {
	if !m.Received.IsZero() && m.Received.After(now.Add(MaxClockAhead)) {
		return refuse(CodeClockAhead, HeaderBridge, "%s: the receive time %s is %v ahead of the ledger's clock (at most %v)",
			HeaderBridge, m.Received.UTC().Format(time.RFC3339Nano), m.Received.Sub(now).Round(time.Millisecond), MaxClockAhead)
	}
	return nil
}

// CheckGapReport refuses a gap report dated after now+MaxClockAhead
// (CodeClockAhead, naming the field) or naming a last sequence past the
// log's last one, lastSeq (CodeGapAhead).
func CheckGapReport(g Gap, now time.Time, lastSeq uint64) error {
	limit := now.Add(MaxClockAhead)
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"disconnected_at", g.DisconnectedAt}, {"reconnected_at", g.ReconnectedAt}, {"noticed_at", g.NoticedAt}} {
		if !f.t.IsZero() && f.t.After(limit) {
			return refuse(CodeClockAhead, f.name, "%s %s is %v ahead of the ledger's clock (at most %v)",
				f.name, f.t.UTC().Format(time.RFC3339Nano), f.t.Sub(now).Round(time.Millisecond), MaxClockAhead)
		}
	}
	if g.LastSeq > lastSeq {
		return refuse(CodeGapAhead, "last_seq", "last_seq %d is past the log's last sequence %d: a gap starts after an envelope the ledger stored", g.LastSeq, lastSeq)
	}
	return nil
}
