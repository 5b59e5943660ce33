package submit_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/subjects"
)

const bareKernel = `{"proposal_id":"k-1","ts_ms":1767225600000,"actor":"agent-billing","action_type":"transact","target":{"resource_type":"payment","resource_id":"inv-1","domain":"stripe.com"},"parameters":{"amount_cents":1},"approval_class":"dual"}`

// TestSubmitBareKernel: a bare kernel proposal is recognised (or marked
// with Ledger-Kernel: 1), wrapped and appended; a V-PROP refusal carries
// the rule id and the bare object's field.
func TestSubmitBareKernel(t *testing.T) {
	nc, _, subjectOf := setup(t)
	msg := request(t, nc, subjects.Submit("default"), bareKernel)
	r, err := submit.ParseReply(msg.Data)
	if err != nil || r.Error != nil || r.ID != "k-1" || r.Seq == 0 {
		t.Fatalf("bare kernel proposal: %s (%v)", msg.Data, err)
	}
	subj, err := subjectOf("1")
	if err != nil || subj != "ledger.default.k-1.proposal.agent-billing" {
		t.Fatalf("stored under %q (%v)", subj, err)
	}

	kernelReq := func(body string) *nats.Msg {
		t.Helper()
		req := nats.NewMsg(subjects.Submit("default"))
		req.Data = []byte(body)
		req.Header.Set(submit.HeaderKernel, "1")
		msg, err := nc.RequestMsg(req, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	msg = kernelReq(bareKernel)
	if r, err := submit.ParseReply(msg.Data); err != nil || !r.Duplicate || r.Seq != 1 {
		t.Fatalf("the same with Ledger-Kernel: 1: %s (%v)", msg.Data, err)
	}
	for _, tc := range []struct{ body, code, field string }{
		{`{"actor":"a"}`, "V-PROP-001", "proposal_id"},
		{`{"proposal_id":"k-2","ts_ms":1,"actor":"a","action_type":"fly","target":{},"parameters":{}}`, "V-PROP-004", "action_type"},
	} {
		msg := kernelReq(tc.body)
		r, err := submit.ParseReply(msg.Data)
		if err != nil || r.Error == nil || r.Error.Code != tc.code || r.Error.Field != tc.field || msg.Header.Get(micro.ErrorCodeHeader) != submit.StatusRefused {
			t.Errorf("%s: %s (%v), want %s field %s", tc.body, msg.Data, err, tc.code, tc.field)
		}
	}
}
