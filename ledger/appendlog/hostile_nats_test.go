package appendlog_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// TestHostileCorpusAppender: through the Appender, every refused case is
// refused before publishing (no attempt, nothing stored) with its code;
// every hostile-but-legal case is stored byte for byte under a subject that
// parses back to its key and sender; and appending the whole corpus again
// in one pipelined AppendMany gives the same refusals and stores nothing
// new (the legal ones are duplicates of their first copy).
func TestHostileCorpusAppender(t *testing.T) {
	cases := badinput.MustLoad(t)
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	stream, err := appendlog.EnsureStream(ctxT(t), js, appendlog.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(t, js, appendlog.AppenderOptions{Now: func() time.Time { return badinput.Now }})
	msgs := func() uint64 {
		t.Helper()
		info, err := stream.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	// Refused cases first: nothing may reach the stream.
	for _, c := range cases {
		if !c.Refused() {
			continue
		}
		res, err := a.Append(ctxT(t), "", c.Data)
		r, ok := ledger.AsRefusal(err)
		switch {
		case !ok:
			t.Errorf("%s: err = %v, want refusal %s", c.Name, err, c.Want)
		case r.Code != c.Want:
			t.Errorf("%s: refused with %s (%s), want %s", c.Name, r.Code, r.Message, c.Want)
		case res.Attempts != 0 || res.Seq != 0 || res.Subject != "":
			t.Errorf("%s: refused after publishing: %+v", c.Name, res)
		}
	}
	if n := msgs(); n != 0 {
		t.Fatalf("refused cases stored %d messages", n)
	}

	// Hostile but legal: stored untouched, subject round-trips.
	seqs := map[string]uint64{}
	for _, c := range cases {
		if c.Refused() {
			continue
		}
		res, err := a.Append(ctxT(t), "", c.Data)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		seqs[c.Name] = res.Seq
		p, err := a.Prepare("", c.Data)
		if err != nil {
			t.Fatalf("%s: prepare after append: %v", c.Name, err)
		}
		m, err := stream.GetMsg(ctxT(t), res.Seq)
		if err != nil {
			t.Fatalf("%s: get seq %d: %v", c.Name, res.Seq, err)
		}
		if !bytes.Equal(m.Data, c.Data) {
			t.Errorf("%s: stored bytes differ from the input", c.Name)
		}
		if m.Subject != p.Subject || m.Subject != res.Subject {
			t.Errorf("%s: stored under %q, prepared %q, result %q", c.Name, m.Subject, p.Subject, res.Subject)
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != p.MsgID {
			t.Errorf("%s: Nats-Msg-Id %q, want %q", c.Name, got, p.MsgID)
		}
		ev, err := subjects.ParseEvent(m.Subject)
		if err != nil || ev.Key != p.Decoded.Key || ev.Sender != p.Decoded.Env.From || ev.Type != string(p.Decoded.Type) || ev.Space != ledger.DefaultSpace {
			t.Errorf("%s: subject %q parses to %+v (%v)", c.Name, m.Subject, ev, err)
		}
	}
	stored := msgs()
	if stored != uint64(len(seqs)) {
		t.Fatalf("stream holds %d messages after %d legal appends", stored, len(seqs))
	}

	// The whole corpus again, pipelined: same answers, nothing new stored.
	raws := make([][]byte, len(cases))
	for i, c := range cases {
		raws[i] = c.Data
	}
	for i, res := range a.AppendMany(ctxT(t), "", raws) {
		c := cases[i]
		if c.Refused() {
			if r, ok := ledger.AsRefusal(res.Err); !ok || r.Code != c.Want || res.Attempts != 0 {
				t.Errorf("AppendMany %s: %+v, want refusal %s before publishing", c.Name, res, c.Want)
			}
			continue
		}
		if res.Err != nil || !res.Duplicate || res.Seq != seqs[c.Name] {
			t.Errorf("AppendMany %s: %+v, want duplicate of seq %d", c.Name, res, seqs[c.Name])
		}
	}
	if n := msgs(); n != stored {
		t.Fatalf("second pass stored %d new messages", n-stored)
	}
	t.Logf("%d cases: %d refused before publishing, %d legal stored once", len(cases), len(cases)-len(seqs), len(seqs))
}
