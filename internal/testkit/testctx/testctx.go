// Package testctx bounds a test's waits by the test itself, not by a fixed
// few seconds: a loaded machine (CI, `make test` beside other work) can
// take far longer than a quiet one to reach a condition that does come.
package testctx

import (
	"context"
	"testing"
	"time"
)

// Max is the longest a Context lasts when the test has a later deadline
// or none.
const Max = 2 * time.Minute

// margin is kept before the test binary's own deadline, so that a wait
// that runs out fails the test with its own message rather than the
// binary panicking on -timeout.
const margin = 10 * time.Second

// Context returns a context that ends at Max from now, or shortly before
// the test binary's deadline when that comes first, and at the test's
// cleanup.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), Deadline(t))
	t.Cleanup(cancel)
	return ctx
}

// Deadline is when a Context made now ends: Max from now, or shortly
// before the test binary's deadline when that comes first.
func Deadline(t testing.TB) time.Time {
	d := time.Now().Add(Max)
	if dl, ok := binaryDeadline(t); ok && dl.Before(d) {
		d = dl
	}
	return d
}

// Whole returns a context for a test that is long by nature (a cluster
// under load, thousands of events through the race detector): it ends
// shortly before the test binary's deadline (go test -timeout; `make test`
// gives 30m), or after WholeMax without one, and at the test's cleanup.
func Whole(t testing.TB) context.Context {
	t.Helper()
	d, ok := binaryDeadline(t)
	if !ok {
		d = time.Now().Add(WholeMax)
	}
	ctx, cancel := context.WithDeadline(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// WholeMax bounds Whole when the test binary has no deadline.
const WholeMax = 10 * time.Minute

// binaryDeadline is the test binary's deadline less a margin (but not
// before a second from now: past it the binary is about to panic anyway).
func binaryDeadline(t testing.TB) (time.Time, bool) {
	dt, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	dl, ok := dt.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return later(dl.Add(-margin), time.Now().Add(time.Second)), true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Until calls cond every interval until it returns true, and fails the
// test with what() when the test's Context ends first.
func Until(t testing.TB, interval time.Duration, cond func() bool, what func() string) {
	t.Helper()
	ctx := Context(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s (%v)", what(), ctx.Err())
		case <-time.After(interval):
		}
	}
}
