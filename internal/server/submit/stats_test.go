package submit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/buildinfo"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// Issue 17: `nats micro stats` counts the submit service's refusals as
// errors. Refusals of every kind (an envelope's, a bare kernel
// proposal's, a whole batch's, a bad space token's) go through a real
// nats-server; the $SRV.STATS answer then shows one error each on the
// submit endpoint, and the reply bodies stay the refusal objects.
func TestMicroStatsCountRefusals(t *testing.T) {
	nc, svc, _ := setup(t)
	refusals := []struct {
		subject, body, ctype, code string
	}{
		{subjects.Submit("default"), `{"protocol":"mew/v0.4","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`, "", api.CodeMissingField},
		{subjects.Submit("default"), `garbage`, "", api.CodeNotJSON},
		{subjects.Submit("default"), `{"proposal_id":"p-1","actor":"a"}`, "", ledger.RuleTSms},
		{subjects.Submit("default"), `[1,`, "application/json", api.CodeNotJSON},
		{subjects.SubmitRoot + ".~!!", proposal, "", api.CodeBadValue},
	}
	for i, r := range refusals {
		m := &nats.Msg{Subject: r.subject, Data: []byte(r.body), Header: nats.Header{}}
		if r.ctype != "" {
			m.Header.Set(submit.HeaderContentType, r.ctype)
		}
		msg, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatalf("refusal %d: %v", i, err)
		}
		rep, err := submit.ParseReply(msg.Data)
		if err != nil || rep.Error == nil || rep.Error.Code != r.code {
			t.Fatalf("refusal %d: reply %s (%v), want code %s", i, msg.Data, err, r.code)
		}
		if msg.Header.Get(micro.ErrorCodeHeader) != submit.StatusRefused {
			t.Fatalf("refusal %d: headers %v", i, msg.Header)
		}
	}
	// A success last: the endpoint's handler runs one request at a time,
	// so when its answer comes every refusal has been counted.
	if r, err := submit.ParseReply(request(t, nc, subjects.Submit("default"), proposal).Data); err != nil || r.Error != nil {
		t.Fatalf("append: %+v, %v", r, err)
	}

	subj, err := micro.ControlSubject(micro.StatsVerb, submit.DefaultName, "")
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(request(t, nc, subj, "").Data, &st); err != nil {
		t.Fatal(err)
	}
	// The service's version is the binary's (semver, as micro wants it).
	if want := buildinfo.Get().SemVer(); st.Version != want || want == "" {
		t.Errorf("submit service version %q, want the binary's %q", st.Version, want)
	}
	var ep *micro.EndpointStats
	for _, e := range st.Endpoints {
		if e.Name == submit.DefaultEndpoint {
			ep = e
		}
	}
	if ep == nil {
		t.Fatalf("no %s endpoint in %+v", submit.DefaultEndpoint, st)
	}
	if ep.NumErrors != len(refusals) || ep.NumRequests < len(refusals) {
		t.Fatalf("$SRV.STATS: %d errors of %d requests, want %d errors", ep.NumErrors, ep.NumRequests, len(refusals))
	}
	if !strings.Contains(ep.LastError, api.CodeBadValue) {
		t.Fatalf("last error %q, want the last refusal's", ep.LastError)
	}
	if got := svc.Stats(); got.Endpoints[0].NumErrors != len(refusals) {
		t.Fatalf("Stats(): %+v", got.Endpoints[0])
	}

	// The gap endpoint too: a gap that does not parse, and one whose
	// space the Appender refuses; then a gap recorded.
	gapRefusals := []struct{ space, body, code string }{
		{"default", `{"bridge":"rec"}`, api.CodeMissingField},
		{strings.Repeat("s", ledger.MaxSpaceBytes+1), `{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z"}`, api.CodeTooLong},
	}
	for i, r := range gapRefusals {
		msg := request(t, nc, subjects.Gap(r.space), r.body)
		rep, err := submit.ParseReply(msg.Data)
		if err != nil || rep.Error == nil || rep.Error.Code != r.code || msg.Header.Get(micro.ErrorCodeHeader) != submit.StatusRefused {
			t.Fatalf("gap refusal %d: reply %s %v (%v), want code %s", i, msg.Data, msg.Header, err, r.code)
		}
	}
	if r, err := submit.ParseReply(request(t, nc, subjects.Gap("default"), `{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z"}`).Data); err != nil || r.Error != nil {
		t.Fatalf("gap: %+v, %v", r, err)
	}
	for _, e := range svc.Stats().Endpoints {
		if e.Name == submit.GapEndpoint && (e.NumErrors != len(gapRefusals) || e.NumRequests < len(gapRefusals)) {
			t.Fatalf("gap endpoint: %d errors of %d requests, want %d errors", e.NumErrors, e.NumRequests, len(gapRefusals))
		}
	}
}
