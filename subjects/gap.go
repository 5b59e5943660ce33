package subjects

import (
	"fmt"
	"strings"
)

// GapRoot is the subject prefix of the ledger's gap endpoint: a bridge
// recording a MEW space reports a recording gap (contract §14) with a request
// on ledger.gap.<space>, and the ledger writes the ledger/gap event itself.
const GapRoot = Root + ".gap"

// GapWildcard is the subject the gap endpoint subscribes to, for every
// space.
const GapWildcard = GapRoot + ".*"

// Gap returns the gap-endpoint subject for a space: ledger.gap.<space>.
func Gap(space string) string {
	return GapRoot + "." + EncodeToken(space)
}

// ParseGap returns the space of a gap subject.
func ParseGap(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, GapRoot+".")
	if !ok || strings.Contains(rest, ".") {
		return "", fmt.Errorf("%w: %q is not a gap subject", ErrBadSubject, subject)
	}
	return decodeSpace(rest)
}
