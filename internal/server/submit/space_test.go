package submit_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/subjects"
)

// TestSpaceNeverGuessed: a submit or gap subject whose space token does
// not name a space ("~" is the encoding of the empty space, "~!!" no
// encoding at all) is refused naming the field "space", and nothing is
// stored (SPEC §10, issue 29 item 6): the empty space is not the default.
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
