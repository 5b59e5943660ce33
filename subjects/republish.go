package subjects

import (
	"fmt"
	"strings"
)

// Republish returns the subject under which a replay republishes the event
// stored at subject: prefix followed by everything of subject after the
// leading "ledger" token. So with prefix "audit.copy",
// ledger.default.p1.proposal.alice becomes
// audit.copy.default.p1.proposal.alice, and a consumer of the copy can hand
// the tail (prefix stripped, "ledger" put back) to ParseEvent.
//
// subject must be a valid event subject (ParseEvent). prefix must be one or
// more non-empty tokens without wildcards or white space (CheckPrefix). The
// result must not be a subject the LEDGER stream binds (a five-token
// ledger.* subject): republishing into the ledger itself would append every
// event a second time. Errors wrap ErrBadSubject.
func Republish(prefix, subject string) (string, error) {
	if err := CheckPrefix(prefix); err != nil {
		return "", err
	}
	if _, err := ParseEvent(subject); err != nil {
		return "", fmt.Errorf("subjects: republish %q: %w", subject, err)
	}
	out := prefix + strings.TrimPrefix(subject, Root)
	if InStream(out) {
		return "", fmt.Errorf("%w: republishing %q under prefix %q gives %q, which the %s stream binds: the events would be appended to the ledger again",
			ErrBadSubject, subject, prefix, out, StreamName)
	}
	return out, nil
}

// CheckPrefix reports whether prefix can start a republish subject: one or
// more dot-separated tokens, none empty, none holding a wildcard ('*', '>')
// or white space. The error wraps ErrBadSubject and names the prefix.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("%w: empty republish prefix", ErrBadSubject)
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" {
			return fmt.Errorf("%w: republish prefix %q has an empty token", ErrBadSubject, prefix)
		}
		if strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("%w: republish prefix %q holds a wildcard or white space", ErrBadSubject, prefix)
		}
	}
	return nil
}

// InStream reports whether subject is one the LEDGER stream binds
// (StreamSubjects: exactly five tokens, the first "ledger").
func InStream(subject string) bool {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 || parts[0] != Root {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" {
			return false
		}
	}
	return true
}
