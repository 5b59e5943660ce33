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
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := dt.Deadline(); ok && dl.Add(-margin).Before(d) {
			d = dl.Add(-margin)
		}
	}
	return d
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
