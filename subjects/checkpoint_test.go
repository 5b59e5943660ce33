package subjects

import (
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestCheckpointSubject: checkpoint subjects round-trip, match the
// wildcard, and never match the stream's binding.
func TestCheckpointSubject(t *testing.T) {
	for _, origin := range []string{"host/ledger", "ledger", "a.b c*>"} {
		s := Checkpoint(origin)
		if got, err := ParseCheckpoint(s); err != nil || got != origin {
			t.Fatalf("ParseCheckpoint(%q) = %q, %v", s, got, err)
		}
		if !server.SubjectsCollide(s, CheckpointWildcard) {
			t.Fatalf("%q does not match %q", s, CheckpointWildcard)
		}
		if server.SubjectsCollide(s, StreamSubjects) {
			t.Fatalf("%q would be stored in the LEDGER stream (%q)", s, StreamSubjects)
		}
	}
	if server.SubjectsCollide(CheckpointWildcard, StreamSubjects) {
		t.Fatal("the checkpoint wildcard overlaps the stream's subjects")
	}
	for _, bad := range []string{"ledger.checkpoint", "ledger.checkpoint.a.b", "ledger.gap.x", "ledger.checkpoint.~!"} {
		if _, err := ParseCheckpoint(bad); err == nil {
			t.Fatalf("ParseCheckpoint(%q) accepted", bad)
		}
	}
	if _, err := ParseCheckpoint("ledger.x.y"); !errors.Is(err, ErrBadSubject) {
		t.Fatal(err)
	}
}
