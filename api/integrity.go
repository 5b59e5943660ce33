package api

import "fmt"

// The log checks itself (contract §16): the wire shapes of damage found
// in the ledger's own log, of the scrub that looks for it, and of the
// signing it stops.

// CodeLogDamaged answers (HTTP 409) a proof, verified read or export that
// touches a damaged or missing sequence of the log, or any proof once the
// tree no longer extends the checkpoints signed (kind rewritten).
const CodeLogDamaged = "log_damaged"

// HeaderLogDamaged is set on every answer of a ledger whose log is
// damaged (reads keep being answered): its value is LogDamage.Message.
const HeaderLogDamaged = "Ledger-Log-Damaged"

// Kinds of LogDamage.
const (
	// DamageMissing: a sequence the log should hold does not answer.
	DamageMissing = "missing"
	// DamageAltered: the stored message does not hash to the leaf the
	// tree holds for its sequence.
	DamageAltered = "altered"
	// DamageRewritten: the tree itself no longer extends a checkpoint
	// the ledger signed (it was rebuilt from an altered stream).
	DamageRewritten = "rewritten"
)

// LogDamage is the first damaged or missing sequence the ledger found in
// its own log. It stays until the sequence checks again (the stream was
// restored).
type LogDamage struct {
	Kind string `json:"kind"`
	// Seq is the first damaged sequence (rewritten: the size of the first
	// signed checkpoint the tree no longer matches; the rewritten leaf is
	// at or before it).
	Seq uint64 `json:"seq"`
	// Expected is the leaf hash the tree holds (rewritten: the signed
	// root), Found what the stream's message hashes to (rewritten: the
	// tree's root of that size); base64, empty when there is nothing to
	// hash (missing).
	Expected string `json:"expected,omitempty"`
	Found    string `json:"found,omitempty"`
	// Message says it in words.
	Message string `json:"message"`
}

func (d *LogDamage) Error() string { return d.Message }

// DamageMessage is LogDamage.Message for kind, seq, expected and found.
func DamageMessage(kind string, seq uint64, expected, found string) string {
	switch kind {
	case DamageMissing:
		if expected == "" {
			return fmt.Sprintf("log damaged: seq %d is missing from the stream (not folded yet: the projection is held at seq %d until it is restored)", seq, seq-1)
		}
		return fmt.Sprintf("log damaged: seq %d is missing from the stream (the tree holds its leaf %s)", seq, expected)
	case DamageAltered:
		return fmt.Sprintf("log damaged: seq %d altered: the stream's message hashes to %s, the tree holds %s", seq, found, expected)
	case DamageRewritten:
		return fmt.Sprintf("log rewritten: the tree of size %d has root %s, the checkpoint signed for size %d has root %s", seq, found, seq, expected)
	}
	return fmt.Sprintf("log damaged: seq %d %s", seq, kind)
}

// Scrub is the scrub's progress in GET /v1/status: the stream re-read and
// every leaf recomputed against the tree.
type Scrub struct {
	// Rate is the full pass's bound in messages a second; Period the
	// shortest time between two full passes.
	Rate   int    `json:"rate"`
	Period string `json:"period"`
	// Passes is the number of full passes completed since the start.
	Passes uint64 `json:"passes"`
	// Position is the next sequence the full pass in hand reads (0 when
	// none is running) and PassEnd the last it reads.
	Position uint64 `json:"position"`
	PassEnd  uint64 `json:"pass_end"`
	// CheckedThrough is the sequence through which every message
	// folded since the start has been checked at least once (the tail).
	CheckedThrough uint64 `json:"checked_through"`
	// Checked counts messages checked since the start (pass and tail).
	Checked uint64 `json:"checked"`
	// LastPassEnded is when the last full pass ended (RFC 3339), "" when
	// none has.
	LastPassEnded string `json:"last_pass_ended,omitempty"`
	// Findings counts damage found since the start.
	Findings uint64 `json:"findings"`
}

// SigningStopped says checkpoint signing stopped: at which tree size, and
// why.
type SigningStopped struct {
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
}

// ImportBoundary is GET /v1/status's import: what an outside verifier
// must know to rebuild an imported ledger's leaves (contract §16, §9).
type ImportBoundary struct {
	// ImportedThrough is the last sequence written by an import (0: the
	// log was never imported). At or below it a leaf's time is the
	// message's OriginalTimeHeader (when valid) and its message id its
	// OriginalMsgIDHeader; above it, the stream's own.
	ImportedThrough    uint64 `json:"imported_through"`
	OriginalTimeHeader string `json:"original_time_header"`
	OriginalIDHeader   string `json:"original_msg_id_header"`
}

// ProjectionHeld is GET /v1/status's projection_held: the projection
// stops at Seq because Missing (Seq+1) is missing from the stream; it
// resumes by itself once that sequence is restored (from a backup or an
// export). It comes with a log_damage of kind missing at Missing.
type ProjectionHeld struct {
	Seq     uint64 `json:"seq"`
	Missing uint64 `json:"missing"`
	Reason  string `json:"reason"`
}
