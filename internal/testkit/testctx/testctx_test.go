package testctx_test

import (
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/testctx"
)

func TestContextBoundedByTest(t *testing.T) {
	ctx := testctx.Context(t)
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > testctx.Max {
		t.Fatalf("deadline %v (ok %v), want within %v", dl, ok, testctx.Max)
	}
	if tdl, ok := t.Deadline(); ok && dl.After(tdl) {
		t.Fatalf("context outlives the test binary's deadline %v", tdl)
	}
}

func TestUntil(t *testing.T) {
	n := 0
	testctx.Until(t, time.Millisecond, func() bool { n++; return n == 3 }, func() string { return "never" })
	if n != 3 {
		t.Fatalf("cond called %d times", n)
	}
}
