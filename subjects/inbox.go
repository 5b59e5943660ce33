package subjects

import "strings"

// IsInbox reports whether subject is a reply inbox: _INBOX.<token>...
// (nats.go's default inboxes and the per-user ones of InboxPrefix). The
// submit service answers only these, so a request cannot make it publish
// with its own rights anywhere else (on an event subject, say).
func IsInbox(subject string) bool {
	rest, ok := strings.CutPrefix(subject, InboxRoot+".")
	return ok && rest != "" && !strings.ContainsAny(subject, " \t\r\n*>") && !strings.Contains(rest, "..") && !strings.HasSuffix(rest, ".")
}
