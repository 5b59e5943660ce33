package subjects

import (
	"errors"
	"strings"
	"testing"
)

func TestEventString(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"plain", Event{Space: "default", Key: "env-req-1", Type: "proposal", Sender: "untrusted-agent"}, "ledger.default.env-req-1.proposal.untrusted-agent"},
		{"dots and wildcards encoded", Event{Space: "team.a", Key: "a.b", Type: "withdraw", Sender: "*>"}, "ledger.~dGVhbS5h.~YS5i.withdraw.~Kj4"},
		{"unicode", Event{Space: "default", Key: "prøp", Type: "reject", Sender: "fs agent"}, "ledger.default.~cHLDuHA.reject.~ZnMgYWdlbnQ"},
		{"long id encoded", Event{Space: "s", Key: strings.Repeat("k", 129), Type: "fulfil", Sender: "h"}, "ledger.s.~" + strings.Repeat("a2tr", 43) + ".fulfil.h"},
		{"128 chars plain", Event{Space: "s", Key: strings.Repeat("k", 128), Type: "fulfil", Sender: "h"}, "ledger.s." + strings.Repeat("k", 128) + ".fulfil.h"},
		{"tilde encoded", Event{Space: "~", Key: "~YQ", Type: "note", Sender: "x"}, "ledger.~fg.~fllR.note.x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.ev.String()
			if got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			back, err := ParseEvent(got)
			if err != nil || back != tc.ev {
				t.Fatalf("ParseEvent(%q) = %+v, %v; want %+v", got, back, err, tc.ev)
			}
		})
	}
}

func TestParseEventErrors(t *testing.T) {
	tests := []struct {
		subject string
		want    error
	}{
		{"", ErrBadSubject},
		{"ledger.default.k.proposal", ErrBadSubject},
		{"ledger.default.k.proposal.a.b", ErrBadSubject},
		{"other.default.k.proposal.a", ErrBadSubject},
		{"ledger.submit.default", ErrBadSubject},
		{"ledger..k.proposal.a", ErrBadToken},
		{"ledger.default.k.proposal.", ErrBadToken},
		{"ledger.default.~!!.proposal.a", ErrBadToken},
		{"ledger.default.~YWJj.proposal.a", ErrBadToken}, // "abc" must be plain
		{"ledger.default.~_w.proposal.a", ErrBadToken},   // not UTF-8
		{"ledger.default.k.~cHJvcG9zYWw.a", ErrBadToken}, // type is never encoded
		{"ledger.default.k.pro posal.a", ErrBadToken},
		{"ledger.*.k.proposal.a", ErrBadToken},
	}
	for _, tc := range tests {
		t.Run(tc.subject, func(t *testing.T) {
			ev, err := ParseEvent(tc.subject)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseEvent(%q) = %+v, %v; want %v", tc.subject, ev, err, tc.want)
			}
		})
	}
}

func TestSubmit(t *testing.T) {
	tests := []struct{ space, subject string }{
		{"default", "ledger.submit.default"},
		{"team.a", "ledger.submit.~dGVhbS5h"},
	}
	for _, tc := range tests {
		if got := Submit(tc.space); got != tc.subject {
			t.Errorf("Submit(%q) = %q, want %q", tc.space, got, tc.subject)
		}
		space, err := ParseSubmit(tc.subject)
		if err != nil || space != tc.space {
			t.Errorf("ParseSubmit(%q) = %q, %v", tc.subject, space, err)
		}
	}
	for _, bad := range []string{"ledger.submit", "ledger.submit.a.b", "ledger.default.a.b.c", "ledger.submit.~YWJj", "ledger.submit.~"} {
		if _, err := ParseSubmit(bad); err == nil {
			t.Errorf("ParseSubmit(%q) accepted", bad)
		}
	}
	if SubmitWildcard != "ledger.submit.*" {
		t.Errorf("SubmitWildcard = %q", SubmitWildcard)
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		space, key, typ, sender, want string
	}{
		{"", "", "", "", "ledger.*.*.*.*"},
		{"default", "", "", "", "ledger.default.*.*.*"},
		{"default", "a.b", "", "", "ledger.default.~YS5i.*.*"},
		{"", "", "withdraw", "", "ledger.*.*.withdraw.*"},
		{"", "", "", "untrusted-agent", "ledger.*.*.*.untrusted-agent"},
		{"s", "k", "fulfil", "h u", "ledger.s.k.fulfil.~aCB1"},
	}
	for _, tc := range tests {
		if got := Filter(tc.space, tc.key, tc.typ, tc.sender); got != tc.want {
			t.Errorf("Filter(%q,%q,%q,%q) = %q, want %q", tc.space, tc.key, tc.typ, tc.sender, got, tc.want)
		}
	}
	if got := SpaceFilter("team.a"); got != "ledger.~dGVhbS5h.*.*.*" {
		t.Errorf("SpaceFilter = %q", got)
	}
	if got := AgentPublish("default", "agent.1"); got != "ledger.default.*.*.~YWdlbnQuMQ" {
		t.Errorf("AgentPublish = %q", got)
	}
	if StreamSubjects != "ledger.*.*.*.*" {
		t.Errorf("StreamSubjects = %q", StreamSubjects)
	}
	// A filter built from an event's fields matches that event's subject.
	ev := Event{Space: "sp ace", Key: "k.1", Type: "reject", Sender: "s>"}
	if f := Filter(ev.Space, ev.Key, ev.Type, ev.Sender); f != ev.String() {
		t.Errorf("full filter %q != subject %q", f, ev.String())
	}
}

func TestFiledUnder(t *testing.T) {
	for _, c := range []struct{ subject, space, key string }{
		{Event{Space: "default", Key: "p-1", Type: "proposal", Sender: "alice"}.String(), "default", "p-1"},
		{"ledger.sp.k", "sp", "k"},       // too few tokens: raw tokens
		{"ledger.sp", "sp", "ledger.sp"}, // no key token: the whole subject
		{"x", "", "x"},                   // one token
		{"ledger.a.b.c.d.e.f", "a", "b"}, // too many tokens: raw tokens
	} {
		if space, key := FiledUnder(c.subject); space != c.space || key != c.key {
			t.Errorf("FiledUnder(%q) = %q, %q; want %q, %q", c.subject, space, key, c.space, c.key)
		}
	}
}
