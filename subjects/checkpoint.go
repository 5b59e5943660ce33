package subjects

import (
	"fmt"
	"strings"
)

// CheckpointRoot is the prefix of the subjects the ledger publishes its
// signed checkpoints on (contract §16): ledger.checkpoint.<origin>. They have
// three tokens, so the LEDGER stream (which binds five-token subjects,
// StreamSubjects) never stores them: a checkpoint is a statement about the
// log, not an entry of it. Watchers that keep checkpoints subscribe to
// CheckpointWildcard (or to one origin's subject), or store them in a
// stream of their own.
const CheckpointRoot = Root + ".checkpoint"

// CheckpointWildcard matches the checkpoint subjects of every origin.
const CheckpointWildcard = CheckpointRoot + ".*"

// Checkpoint returns the subject of origin's checkpoints:
// ledger.checkpoint.<origin> (the origin encoded as a token: "host/ledger"
// has a '/', so it is "~" + base64url).
func Checkpoint(origin string) string { return CheckpointRoot + "." + EncodeToken(origin) }

// ParseCheckpoint returns the origin of a checkpoint subject.
func ParseCheckpoint(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, CheckpointRoot+".")
	if !ok || strings.Contains(rest, ".") {
		return "", fmt.Errorf("%w: %q is not a checkpoint subject", ErrBadSubject, subject)
	}
	return DecodeToken(rest)
}
