package subjects

import (
	"errors"
	"strings"
	"testing"
)

func TestRepublish(t *testing.T) {
	ev := Event{Space: "team.a", Key: "p-1", Type: "proposal", Sender: "alice"}
	tests := []struct {
		prefix, subject, want string
		err                   error
	}{
		{"audit", "ledger.default.p1.proposal.alice", "audit.default.p1.proposal.alice", nil},
		{"audit.copy", ev.String(), "audit.copy.~dGVhbS5h.p-1.proposal.alice", nil},
		{"ledger.copy", "ledger.default.p1.reject.bob", "ledger.copy.default.p1.reject.bob", nil}, // six tokens: not bound
		{"ledger", "ledger.default.p1.proposal.alice", "", ErrBadSubject},                         // back into the stream
		{"", "ledger.default.p1.proposal.alice", "", ErrBadSubject},
		{"a..b", "ledger.default.p1.proposal.alice", "", ErrBadSubject},
		{"a.*", "ledger.default.p1.proposal.alice", "", ErrBadSubject},
		{"a.>", "ledger.default.p1.proposal.alice", "", ErrBadSubject},
		{"a b", "ledger.default.p1.proposal.alice", "", ErrBadSubject},
		{"audit", "ledger.submit.default", "", ErrBadSubject},
		{"audit", "other.default.p1.proposal.alice", "", ErrBadSubject},
	}
	for _, tc := range tests {
		t.Run(tc.prefix+"|"+tc.subject, func(t *testing.T) {
			got, err := Republish(tc.prefix, tc.subject)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Republish(%q, %q) = %q, %v; want %v", tc.prefix, tc.subject, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Republish(%q, %q) = %q, %v; want %q", tc.prefix, tc.subject, got, err, tc.want)
			}
			// The tail after the prefix is the original subject's tail.
			back, err := ParseEvent(Root + strings.TrimPrefix(got, tc.prefix))
			if err != nil || back.String() != tc.subject {
				t.Fatalf("tail of %q does not parse back to %q: %+v %v", got, tc.subject, back, err)
			}
		})
	}
}

func TestInStream(t *testing.T) {
	for s, want := range map[string]bool{
		"ledger.a.b.c.d":        true,
		"ledger.a.b.c":          false,
		"ledger.a.b.c.d.e":      false,
		"ledger..b.c.d":         false,
		"audit.a.b.c.d":         false,
		"ledger.submit.default": false,
	} {
		if got := InStream(s); got != want {
			t.Errorf("InStream(%q) = %v, want %v", s, got, want)
		}
	}
}
