package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// TestGapWritePaths: a gap reported through the HTTP API (POST /v1/gaps)
// and through the submit service's gap endpoint (ledger.gap.<space>) is
// written by the ledger (sender ledger, kind ledger/gap) and listed; a
// repeated report is a duplicate; malformed reports are refused with the
// field; nobody can append a ledger/gap envelope or write as the ledger
// through the normal append paths.
func TestGapWritePaths(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(a.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ns, err := bridge.NewNATSSink(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	ctx := context.Background()
	at := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	g1 := ledger.Gap{Bridge: "rec", MEWSpace: "m", Gateway: "ws://gw", LastEnvelope: "e1", DisconnectedAt: at, ReconnectedAt: at.Add(time.Second), Reason: "read: EOF"}
	g2 := ledger.Gap{Bridge: "rec", DisconnectedAt: at.Add(time.Minute), Reason: "bridge stopped"}

	for _, tc := range []struct {
		name string
		sink bridge.Sink
		g    ledger.Gap
	}{{"http", bridge.HTTPSink{Client: cl.Client}, g1}, {"nats", ns, g2}} {
		r, err := tc.sink.Gap(ctx, "gapspace", tc.g)
		if err != nil || r.Error != nil || r.Seq == 0 || r.Duplicate || r.ID != ledger.GapID(tc.g) {
			t.Fatalf("%s: %+v %v", tc.name, r, err)
		}
		again, err := tc.sink.Gap(ctx, "gapspace", tc.g)
		if err != nil || !again.Duplicate || again.Seq != r.Seq {
			t.Errorf("%s: repeated report %+v %v, want the same seq, duplicate", tc.name, again, err)
		}
	}
	gaps := gapsOf(t, cl, "gapspace")
	if len(gaps) != 2 || gaps[0].LastEnvelope != "e1" || gaps[0].ReconnectedAt == nil || gaps[1].ReconnectedAt != nil || gaps[1].Reason != "bridge stopped" {
		t.Errorf("gaps %+v", gaps)
	}

	post := func(body string) (int, api.ErrorBody) {
		resp, err := http.Post(a.HTTPURL()+"/v1/gaps?space=gapspace", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		return resp.StatusCode, eb
	}
	for _, tc := range []struct{ body, code, field string }{
		{`not json`, api.CodeNotJSON, ""},
		{`{"bridge":"rec"}`, api.CodeMissingField, "disconnected_at"},
		{`{"disconnected_at":"2026-11-24T05:00:00Z"}`, api.CodeMissingField, "bridge"},
		{`{"bridge":"ledger","disconnected_at":"2026-11-24T05:00:00Z"}`, api.CodeBadValue, "bridge"},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","extra":1}`, api.CodeNotJSON, ""},
		{`{"bridge":"rec","disconnected_at":"2026-11-24T05:00:00Z","reconnected_at":"2026-11-24T04:00:00Z"}`, api.CodeBadValue, "reconnected_at"},
	} {
		code, eb := post(tc.body)
		if code != http.StatusBadRequest || eb.Error == nil || eb.Error.Code != tc.code || eb.Error.Field != tc.field {
			t.Errorf("%s: %d %+v, want 400 %s %q", tc.body, code, eb.Error, tc.code, tc.field)
		}
	}
	r, err := ns.Gap(ctx, "gapspace", ledger.Gap{Bridge: "ledger", DisconnectedAt: at})
	if err != nil || r.Error == nil || r.Error.Field != "bridge" {
		t.Errorf("nats gap as ledger: %+v %v", r, err)
	}

	// The normal paths never write as the ledger.
	raw, _ := ledger.GapEnvelope(ledger.Gap{Bridge: "forger", DisconnectedAt: at})
	for _, s := range []bridge.Sink{bridge.HTTPSink{Client: cl.Client}, ns, bridge.AppenderSink{Appender: a.Appender()}} {
		r, err := s.Append(ctx, "gapspace", raw, "")
		if err != nil || r.Error == nil {
			t.Errorf("%T appended a ledger/gap envelope: %+v %v", s, r, err)
		}
	}
	chat := []byte(`{"protocol":"mew/v0.4","id":"c1","from":"mallory","kind":"chat","correlation_id":["x"],"payload":{"text":"hi"}}`)
	for _, s := range []bridge.Sink{ns, bridge.AppenderSink{Appender: a.Appender()}} {
		r, err := s.Append(ctx, "gapspace", chat, ledger.LedgerSender)
		if err != nil || r.Error == nil || r.Error.Code != api.CodeReservedSender {
			t.Errorf("%T appended under the sender ledger: %+v %v", s, r, err)
		}
	}
	// Each sink appends a lifecycle envelope (the NATS one through the
	// submit service), and a retry is a duplicate.
	for i, s := range []bridge.Sink{bridge.HTTPSink{Client: cl.Client}, ns, bridge.AppenderSink{Appender: a.Appender()}} {
		prop := []byte(`{"protocol":"mew/v0.4","id":"p` + string(rune('0'+i)) + `","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`)
		r, err := s.Append(ctx, "gapspace", prop, "")
		if err != nil || r.Error != nil || r.Seq == 0 || r.Duplicate {
			t.Errorf("%T: %+v %v", s, r, err)
		}
		if again, err := s.Append(ctx, "gapspace", prop, ""); err != nil || !again.Duplicate || again.Seq != r.Seq {
			t.Errorf("%T retry: %+v %v", s, again, err)
		}
	}
	if _, err := (bridge.HTTPSink{Client: cl.Client}).Append(ctx, "gapspace", chat, "mallory"); err == nil {
		t.Error("the HTTP sink published under a given sender")
	}
	if n := statsGaps(t, cl, "gapspace"); n != 2 {
		t.Errorf("stats gaps %d, want 2", n)
	}
}
