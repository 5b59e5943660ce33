package projector_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
)

// TestLiveFoldRealTraffic: through a real JetStream and Pebble, the live
// projector and a rebuild from sequence 1 agree byte for byte on a log with
// a message carrying Ledger-Msg-Id-Clash (anomaly msg_id_clash, read from
// the header by both), a reused id, a gap written by the system path, and
// the seeds' lifecycle forms.
func TestLiveFoldRealTraffic(t *testing.T) {
	r := newRig(t)
	s := openStore(t, t.TempDir())
	runProjector(t, r.js, s, projector.Options{})
	ctx, cancel := context.WithCancel(testctx.Whole(t))
	defer cancel()

	r.appendAll(t, [][]byte{
		[]byte(`{"protocol":"mew/v0.4","id":"p1","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`),
		[]byte(`{"protocol":"mew/v0.4","id":"p2","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","targeting":{"preferred":"fs","exclusive":true},"params":{}}}`),
		[]byte(`{"protocol":"mew/v0.4","id":"fs-agent-1","from":"fs","kind":"mcp/reject","correlation_id":["p1"],"payload":{"reason":"busy"}}`),
		[]byte(`{"protocol":"mew/v0.4","id":"fs-agent-1","from":"fs","kind":"meup.lifecycle","correlation_id":["p2"],"payload":{"operation":"status","status":"queued"}}`),
	})
	// A message stored under a derived Nats-Msg-Id after a verified clash,
	// as the appender stores it: the header marks it.
	raw := []byte(`{"protocol":"mew/v0.4","id":"f2","from":"rogue","kind":"mcp/request","correlation_id":["p2"],"payload":{"method":"tools/call","params":{}}}`)
	p, err := r.app.Prepare("", raw)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(p.Subject)
	msg.Data = raw
	msg.Header.Set(fold.HeaderMsgIDClash, "default/f2/other")
	if _, err := r.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	gap, err := ledger.GapEnvelope(ledger.Gap{Bridge: "rec", DisconnectedAt: time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC), Reason: "read: EOF"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.app.AppendSystem(ctx, "", gap)
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, s, res.Seq)

	p2, err := s.Get("default", "p2")
	if err != nil {
		t.Fatal(err)
	}
	for _, an := range []string{api.AnomalyIDReused, api.AnomalyMsgIDClash, api.AnomalyExclusiveViolation} {
		if !p2.HasAnomaly(an) {
			t.Errorf("p2 lacks %s: %v", an, p2.Anomalies)
		}
	}
	if len(p2.Statuses) != 1 || p2.Statuses[0].Status != "queued" || p2.State != api.StateFulfilled {
		t.Errorf("p2 %+v", p2)
	}
	gaps, _, err := s.Gaps("default", 0, 0)
	if err != nil || len(gaps) != 1 || gaps[0].Bridge != "rec" {
		t.Fatalf("gaps %+v %v", gaps, err)
	}
	if a, b := dump(t, s), dump(t, rebuildInto(t, r.js)); !bytes.Equal(a, b) {
		t.Fatalf("rebuild differs from the live projection:\nlive:\n%s\nrebuild:\n%s", a, b)
	}
}
