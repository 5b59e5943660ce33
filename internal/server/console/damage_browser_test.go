package console_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/blockfile"
	"github.com/mewledger/ledger/subjects"
)

// Issue 33: the status page turns red with the damage's own words when
// the scrub finds a stored message altered, and shows the scrub's line
// and why signing stopped.
func TestConsoleShowsLogDamage(t *testing.T) {
	o := apptest.Options(t)
	o.CheckpointInterval = 50 * time.Millisecond
	o.ScrubPeriod = 100 * time.Millisecond
	o.ScrubRate = -1
	a := apptest.StartWith(t, o)
	lines := example(t, "golden.jsonl")
	waitSeq(t, a, post(t, a.HTTPURL(), "", lines...))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := blockfile.Rewrite(o.NATSDir(), subjects.StreamName, 1, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"kind"`), []byte(`"KIND"`), 1)
	}); err != nil {
		t.Fatal(err)
	}
	a = apptest.StartWith(t, o)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := a.LogDamage(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no damage found after a minute")
		}
	}
	b := newBrowser(t)
	b.open(a.HTTPURL() + "/ui/status")
	b.wait("the damage banner", `!!document.querySelector("#st-damage")`)
	if got := b.text("#st-damage"); !strings.Contains(got, "Log damaged: altered, seq 1") || !strings.Contains(got, "the tree holds") {
		t.Fatalf("damage banner %q", got)
	}
	var color string
	b.eval(`getComputedStyle(document.querySelector("#st-damage")).color`, &color)
	b.eval(`getComputedStyle(document.querySelector("#st-damage")).color === getComputedStyle(document.querySelector("#st-logcheck .bad")).color ? "red" : "other"`, &color)
	if color != "red" {
		t.Fatalf("the banner is not in the page's alarm colour")
	}
	if got := b.text("#st-logcheck"); !strings.Contains(got, "seq 1 altered") {
		t.Fatalf("log check %q", got)
	}
	if got := b.text("#st-scrub"); !strings.Contains(got, "checked") || !strings.Contains(got, "finding") {
		t.Fatalf("scrub line %q", got)
	}
	if got := b.text("#st-signing"); !strings.Contains(got, "stopped at size") {
		t.Fatalf("signing line %q", got)
	}
	b.shot("status-damaged")
}
