package submit_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/subjects"
)

// TestSpaceNeverGuessed: a submit or gap subject whose space token does
// not name a space ("~" is the encoding of the empty space, "~!!" no
// encoding at all) is refused naming the field "space", and nothing is
// stored (contract §10, issue 29 item 6): the empty space is not the default.
func TestSpaceNeverGuessed(t *testing.T) {
	nc, _, _ := setup(t)
	for _, subj := range []string{
		subjects.SubmitRoot + ".~",
		subjects.SubmitRoot + ".~!!",
		subjects.GapRoot + ".~",
	} {
		msg := request(t, nc, subj, proposal)
		r, err := submit.ParseReply(msg.Data)
		if err != nil || r.Error == nil || r.Error.Field != "space" || r.Seq != 0 {
			t.Errorf("%s: reply %s (%v), want a refusal naming space", subj, msg.Data, err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(context.Background(), subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("%d messages stored from refused subjects", info.State.Msgs)
	}
}

// TestDefaultSpaceByName: ledger.submit.~ with Ledger-Default-Space: 1
// (what the Submitter sends when it is given no space) is the service's
// default space, asked for by name; without the header it is refused
// (TestSpaceNeverGuessed).
func TestDefaultSpaceByName(t *testing.T) {
	nc, _, subjectOf := setup(t)
	msg := nats.NewMsg(subjects.Submit(""))
	msg.Data = []byte(proposal)
	msg.Header.Set(submit.HeaderDefaultSpace, "1")
	reply, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := submit.ParseReply(reply.Data)
	if err != nil || r.Error != nil || r.Seq != 1 {
		t.Fatalf("reply %s (%v)", reply.Data, err)
	}
	subj, err := subjectOf("1")
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := subjects.ParseEvent(subj); err != nil || ev.Space != "default" {
		t.Fatalf("stored on %s (%v), want the default space", subj, err)
	}
}
