package projector_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/projections/projector"
	"github.com/mewledger/ledger/subjects"
)

// TestRetryAfterDuplicateWindowFoldedAsDuplicate: with the stream's
// duplicate window shortened, a retry that comes after the window is
// stored a second time — and the projector, which dedups by envelope id
// for ever, folds it as `duplicate`, changing nothing of the proposal but
// its event count and updated_*.
func TestRetryAfterDuplicateWindowFoldedAsDuplicate(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithCancel(testctx.Whole(t))
	defer cancel()

	// The server's floor: a window under 100ms is refused.
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{DuplicateWindow: 50 * time.Millisecond}); err == nil {
		t.Fatal("a 50ms duplicate window was accepted; nats-server's minimum is 100ms")
	}
	const window = 300 * time.Millisecond
	st, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{DuplicateWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Duplicates; got != window {
		t.Fatalf("duplicate window %v", got)
	}
	app, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	s := openStore(t, t.TempDir())
	runProjector(t, js, s, projector.Options{})

	prop := []byte(`{"protocol":"mew/v0.4","id":"dw-1","from":"alice","to":["fs-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"rm"}}}`)
	rej := []byte(`{"protocol":"mew/v0.4","id":"dw-1-reject","from":"fs-agent","kind":"mcp/reject","correlation_id":["dw-1"],"payload":{"reason":"unsafe"}}`)
	var last uint64
	for _, raw := range [][]byte{prop, rej} {
		r, err := app.Append(ctx, "", raw)
		if err != nil {
			t.Fatal(err)
		}
		last = r.Seq
	}
	waitApplied(t, s, last)
	before, err := s.Get(ledger.DefaultSpace, "dw-1")
	if err != nil {
		t.Fatal(err)
	}

	// Within the window a retry is answered from the stream's memory; the
	// first retry after it is stored again (bounded wait: a duplicate
	// answer stores nothing, so trying again is free). Each retry comes
	// through a fresh appender without an index (another process): an
	// appender answers the envelopes it sent lately itself.
	firstSeq := map[string]uint64{"dw-1": 1, "dw-1-reject": 2}
	retry := func(raw []byte) (ledger.Result, error) {
		a, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
		if err != nil {
			return ledger.Result{}, err
		}
		defer a.Close()
		return a.Append(ctx, "", raw)
	}
	for _, raw := range [][]byte{prop, rej} {
		deadline := testctx.Deadline(t)
		for {
			r, err := retry(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Duplicate {
				if r.Seq <= last {
					t.Fatalf("re-stored at seq %d, not after %d", r.Seq, last)
				}
				last = r.Seq
				break
			}
			if r.Seq != firstSeq[r.ID] {
				t.Fatalf("duplicate answer names seq %d, want %d", r.Seq, firstSeq[r.ID])
			}
			if time.Now().After(deadline) {
				t.Fatalf("still a duplicate long after the %v window", window)
			}
			time.Sleep(window / 3)
		}
	}
	waitApplied(t, s, last)

	after, err := s.Get(ledger.DefaultSpace, "dw-1")
	if err != nil {
		t.Fatal(err)
	}
	if after.Events != before.Events+2 || after.UpdatedSeq != last {
		t.Errorf("events %d → %d, updated_seq %d (want events +2, updated_seq %d)", before.Events, after.Events, after.UpdatedSeq, last)
	}
	b, a := before.Clone(), after.Clone()
	b.Events, a.Events = 0, 0
	b.UpdatedSeq, a.UpdatedSeq = 0, 0
	b.UpdatedAt, a.UpdatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(a, b) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		t.Errorf("the retries changed the proposal:\nbefore %s\nafter  %s", jb, ja)
	}
	h, err := s.History(ledger.DefaultSpace, "dw-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 4 {
		t.Fatalf("history has %d entries: %+v", len(h), h)
	}
	for i, id := range []string{"dw-1", "dw-1-reject"} {
		e := h[2+i]
		if e.ID != id || e.Effect != api.EffectDuplicate || !strings.Contains(e.Detail, "same envelope as seq") {
			t.Errorf("retry of %s folded as %+v, want duplicate", id, e)
		}
	}

	// The log holds both copies, with the same Nats-Msg-Id.
	ids := map[string]int{}
	for seq := uint64(1); seq <= last; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
		if _, err := subjects.ParseEvent(m.Subject); err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != 2 || last != 4 {
		t.Errorf("log of %d messages with Msg-Ids %v, want each of 2 twice", last, ids)
	}
	requireSameStore(t, s, rebuildInto(t, js))
}
