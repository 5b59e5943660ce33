package subjects

import "testing"

func TestIsInbox(t *testing.T) {
	for s, want := range map[string]bool{
		"_INBOX.abc":                   true,
		"_INBOX.alice.x1.2":            true,
		"_INBOX":                       false,
		"_INBOX.":                      false,
		"_INBOX.a..b":                  false,
		"_INBOX.>":                     false,
		"_INBOX.*":                     false,
		"ledger.events.default.a.b.c":  false,
		"$JS.API.STREAM.DELETE.LEDGER": false,
		"x._INBOX.a":                   false,
		"":                             false,
	} {
		if got := IsInbox(s); got != want {
			t.Errorf("IsInbox(%q) = %v, want %v", s, got, want)
		}
	}
}
