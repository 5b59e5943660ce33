package ledger

import (
	"strconv"
	"time"
)

// Imported logs (contract §9: importing an export into an empty ledger
// reproduces the same projection). JetStream stamps every stored message
// with its own time, so an import cannot keep the original stream
// timestamps, which the fold reads (created_at, deadlines, windows). The
// importer therefore publishes each message with HeaderOriginalTime, and
// records in the stream's metadata (MetaImportedThrough) the last sequence
// it wrote. The fold honours the header only at or below that sequence:
// agents cannot forge it (changing stream metadata needs stream-admin
// rights, and the header is ignored on anything appended after the import),
// and the projection stays a pure function of the log and its stream
// configuration.
const (
	// HeaderOriginalTime carries an imported message's original stream
	// time, RFC 3339 with nanoseconds, UTC.
	HeaderOriginalTime = "Ledger-Original-Time"
	// MetaImportedThrough is the LEDGER stream metadata key holding the
	// last sequence written by an import (decimal).
	MetaImportedThrough = "ledger_imported_through"
	// HeaderOriginalMsgID keeps, on an imported message, the Nats-Msg-Id
	// the message had when it was first appended.
	HeaderOriginalMsgID = "Ledger-Original-Msg-Id"
)

// ImportedThrough reads MetaImportedThrough from stream metadata; 0 when
// absent or malformed (then no header is honoured).
func ImportedThrough(meta map[string]string) uint64 {
	n, err := strconv.ParseUint(meta[MetaImportedThrough], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// EventTime returns the ledger time of the message at seq: the original
// time carried by an imported message (seq <= importedThrough and a valid
// HeaderOriginalTime), else the stream timestamp.
func EventTime(seq, importedThrough uint64, header string, stored time.Time) time.Time {
	if seq <= importedThrough && header != "" {
		if t, err := time.Parse(time.RFC3339Nano, header); err == nil {
			return t.UTC()
		}
	}
	return stored.UTC()
}

// MsgIdentity returns the identity of the message at seq: the Nats-Msg-Id
// it was first appended with. For an imported message (seq <=
// importedThrough) that is the id its HeaderOriginalMsgID keeps ("" when
// the original had none), not the import's own; otherwise its
// Nats-Msg-Id. The Merkle tree's leaf holds it, so that an imported log
// has the original's leaves (contract §16).
func MsgIdentity(seq, importedThrough uint64, natsMsgID, originalMsgID string) string {
	if seq <= importedThrough {
		return originalMsgID
	}
	return natsMsgID
}
