package submit_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/subjects"
)

// Issue 15, item 7: the submit service answers only inboxes. A request
// whose reply subject is an event subject must not make the service
// publish its reply there with its own rights (the stream would store
// it); a request with an inbox still gets its answer.
func TestSubmitRepliesOnlyToInboxes(t *testing.T) {
	nc, _, _ := setup(t)
	forged := subjects.Event{Space: "default", Key: "forged", Type: "proposal", Sender: "ledger"}.String()
	if err := nc.PublishMsg(&nats.Msg{Subject: subjects.Submit("default"), Reply: forged, Data: []byte(proposal)}); err != nil {
		t.Fatal(err)
	}
	// The envelope itself is appended (seq 1); a second request, answered
	// on an inbox, is a duplicate of it: when its answer has come, the
	// first request was served (one handler at a time per request).
	msg := request(t, nc, subjects.Submit("default"), proposal)
	if len(msg.Data) == 0 {
		t.Fatal("no answer on the inbox")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testctx.Context(t))
	defer cancel()
	st, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// Flush a round trip so that a reply published before the answer is
	// stored by now.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		m, _ := st.GetMsg(ctx, info.State.LastSeq)
		t.Fatalf("stream holds %d messages, want only the envelope; the last on %s: %s", info.State.Msgs, m.Subject, m.Data)
	}
}
