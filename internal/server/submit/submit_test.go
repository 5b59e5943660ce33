package submit_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

const proposal = `{"protocol":"mew/v0.4","id":"env-req-1","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file"}}}`

func setup(t *testing.T) (*nats.Conn, *submit.Service, func(subject string) (string, error)) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	stream, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app, err := appendlog.NewAppender(js, appendlog.AppenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := submit.Start(ctx, nc, submit.Options{Appender: app, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
		app.Close()
	})
	// subjectOf returns the subject the stream stored seq under.
	subjectOf := func(seq string) (string, error) {
		var n uint64
		if err := json.Unmarshal([]byte(seq), &n); err != nil {
			return "", err
		}
		m, err := stream.GetMsg(ctx, n)
		if err != nil {
			return "", err
		}
		return m.Subject, nil
	}
	return nc, svc, subjectOf
}

func request(t *testing.T, nc *nats.Conn, subject, body string) *nats.Msg {
	t.Helper()
	msg, err := nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

func TestSubmit(t *testing.T) {
	nc, _, subjectOf := setup(t)

	// Good: stored, with its sequence and id.
	msg := request(t, nc, subjects.Submit("default"), proposal)
	r, err := submit.ParseReply(msg.Data)
	if err != nil || r.Error != nil || r.Seq != 1 || r.ID != "env-req-1" || r.Duplicate {
		t.Fatalf("reply %s (%v)", msg.Data, err)
	}
	if h := msg.Header.Get(micro.ErrorCodeHeader); h != "" {
		t.Fatalf("success reply has error header %q", h)
	}
	subj, err := subjectOf("1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (subjects.Event{Space: "default", Key: "env-req-1", Type: "proposal", Sender: "untrusted-agent"}).String(); subj != want {
		t.Fatalf("stored on %s, want %s", subj, want)
	}

	// Duplicate: the same envelope again is stored once.
	msg = request(t, nc, subjects.Submit("default"), proposal)
	r, err = submit.ParseReply(msg.Data)
	if err != nil || r.Error != nil || r.Seq != 1 || !r.Duplicate {
		t.Fatalf("duplicate reply %s (%v)", msg.Data, err)
	}

	// Refused: the code, message and field, in the body and the micro
	// headers; nothing stored.
	msg = request(t, nc, subjects.Submit("default"), `{"protocol":"mew/v0.4","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`)
	r, err = submit.ParseReply(msg.Data)
	if err != nil || r.Error == nil || r.Error.Code != api.CodeMissingField || r.Error.Field != "id" || r.Error.Message == "" || r.Seq != 0 {
		t.Fatalf("refusal reply %s (%v)", msg.Data, err)
	}
	if msg.Header.Get(micro.ErrorCodeHeader) != submit.StatusRefused || msg.Header.Get(micro.ErrorHeader) == "" {
		t.Fatalf("refusal headers %v", msg.Header)
	}
	msg = request(t, nc, subjects.Submit("default"), `{"protocol":"mew/v0.4","id":"x","from":"a","kind":"presence"}`)
	if r, _ = submit.ParseReply(msg.Data); r.Error == nil || r.Error.Code != api.CodeNotLifecycle || r.Error.Field != "kind" {
		t.Fatalf("not-lifecycle reply %s", msg.Data)
	}
	msg = request(t, nc, subjects.Submit("default"), `garbage`)
	if r, _ = submit.ParseReply(msg.Data); r.Error == nil || r.Error.Code != api.CodeNotJSON {
		t.Fatalf("garbage reply %s", msg.Data)
	}

	// The space comes from the subject, encoded as a token.
	space := "team b/ünïcode"
	msg = request(t, nc, subjects.Submit(space), proposal)
	r, err = submit.ParseReply(msg.Data)
	if err != nil || r.Error != nil || r.Seq != 2 || r.Duplicate {
		t.Fatalf("other-space reply %s (%v)", msg.Data, err)
	}
	subj, err = subjectOf("2")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := subjects.ParseEvent(subj)
	if err != nil || ev.Space != space {
		t.Fatalf("stored on %s (%+v, %v), want space %q", subj, ev, err, space)
	}
	// A space token that is not a canonical encoding is refused.
	msg = request(t, nc, subjects.SubmitRoot+".~!!", proposal)
	if r, _ = submit.ParseReply(msg.Data); r.Error == nil || r.Error.Field != "space" {
		t.Fatalf("bad space token reply %s", msg.Data)
	}
}

func TestMicroDiscovery(t *testing.T) {
	nc, svc, _ := setup(t)
	subj, err := micro.ControlSubject(micro.InfoVerb, submit.DefaultName, "")
	if err != nil {
		t.Fatal(err)
	}
	msg := request(t, nc, subj, "")
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	// The submit endpoint, and the gap endpoint of bridges (contract §14).
	if info.Name != submit.DefaultName || len(info.Endpoints) != 2 || info.Endpoints[0].Subject != subjects.SubmitWildcard ||
		info.Endpoints[1].Name != submit.GapEndpoint || info.Endpoints[1].Subject != subjects.GapWildcard {
		t.Fatalf("info %+v", info)
	}
	request(t, nc, subjects.Submit("default"), proposal)
	if st := svc.Stats(); len(st.Endpoints) != 2 || st.Endpoints[0].NumRequests != 1 {
		t.Fatalf("stats %+v", st)
	}

	// Stopped: nobody answers; Stop is safe twice.
	if err := svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = nc.Request(subjects.Submit("default"), []byte(proposal), 5*time.Second)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request after stop: %v, want no responders", err)
	}
}
