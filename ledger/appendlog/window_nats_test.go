package appendlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// What the Index is for (stored.go): without one, an appender recognises
// a retry only within the stream's duplicate window (and the envelopes
// it sent itself lately, committer_recent.go); once the window has passed
// the same envelope appended through another appender (another process)
// is stored again. (With the ledger's projection as its Index it is a
// duplicate for ever: internal/app's dedup tests.)
func TestWithoutIndexRetryAfterWindowIsStoredAgain(t *testing.T) {
	s := natstest.Start(t)
	_, js := natstest.Connect(t, s)
	ctx := context.Background()
	const window = 500 * time.Millisecond
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{DuplicateWindow: window}); err != nil {
		t.Fatal(err)
	}
	a, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	raw := tProposal("win-1", "agent-a").raw()
	first, err := a.Append(ctx, "", raw)
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := a.Append(ctx, "", raw)
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("within the window: %+v %v, want a duplicate of seq %d", again, err, first.Seq)
	}
	time.Sleep(3 * window)
	other, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	late, err := other.Append(ctx, "", raw)
	if err != nil || late.Duplicate || late.Seq == first.Seq {
		t.Fatalf("after the window, without an index: %+v %v, want stored again", late, err)
	}
}
