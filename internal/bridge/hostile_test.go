package bridge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// TestHostileGatewayGivesGap: every hostile input of a gateway — it dies
// (every socket closed, no close frame), it closes normally, it sends a
// reserved opcode, a ping storm, or an endless frame — ends the bridge's
// session at once: /healthz answers 503 with the reason while the gateway
// refuses joins, and once joined again the ledger lists one gap for it,
// whose window starts at the last envelope the ledger stored from the
// bridge. The probe is on throughout.
func TestHostileGatewayGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		input  string
		reason string
	}{
		{mewgw.HostileDie, "connection"},
		{mewgw.HostileCloseNormal, "closed the connection"},
		{mewgw.HostileBadOpcode, "connection"},
		{mewgw.HostilePingStorm, "ping storm"},
		{mewgw.HostileEndless, "endless frame"},
	} {
		t.Run(tc.input, func(t *testing.T) {
			space := "hostile-" + tc.input
			gw, err := mewgw.StartHostile("", "m")
			if err != nil {
				t.Fatal(err)
			}
			addr := gw.Addr()
			t.Cleanup(func() { gw.Close() })
			reg := prometheus.NewRegistry()
			m, err := bridge.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			b := startBridge(t, bridge.Options{Gateway: gw.URL(), MEWSpace: "m", Token: "t", Space: space,
				Sink: bridge.AppenderSink{Appender: a.Appender()}, Metrics: m, ProbeInterval: 20 * time.Millisecond,
				MaxFrameBytes: 4 << 20})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := gw.WaitJoins(ctx, 1); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "joined", func() (bool, string) { h := b.Health(); return h.State == bridge.StateJoined, h.State })
			// One envelope stored from the bridge: the window's start.
			id := "p-" + tc.input
			gw.Broadcast([]byte(`{"protocol":"mew/v0.4","id":"` + id + `","from":"coder","kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`))
			waitFor(t, "the proposal stored", func() (bool, string) { h := b.Health(); return h.LastStored == id, h.LastStored })
			gw.Refuse(true)
			if err := gw.Do(tc.input); err != nil {
				t.Fatal(err)
			}
			if tc.input == mewgw.HostileDie {
				// Killed; it comes back on the same port, refusing joins
				// for now.
				if gw, err = mewgw.StartHostile(addr, "m"); err != nil {
					t.Fatal(err)
				}
				gw.Refuse(true)
				t.Cleanup(func() { gw.Close() })
			}
			waitFor(t, "503 with the reason", func() (bool, string) {
				code, body := scrape(t, b, reg, "/healthz")
				return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason"`), body
			})
			gw.Refuse(false)
			waitFor(t, "the gap recorded", func() (bool, string) {
				h := b.Health()
				return h.Gaps == 1 && h.State == bridge.StateJoined, h.State
			})
			if code, body := scrape(t, b, reg, "/healthz"); code != http.StatusOK {
				t.Errorf("joined again: /healthz %d %s", code, body)
			}
			gaps := gapsOf(t, cl, space)
			if len(gaps) != 1 || !strings.Contains(gaps[0].Reason, tc.reason) || gaps[0].ReconnectedAt == nil || gaps[0].NoticedAt == nil {
				t.Fatalf("gaps %+v, want one saying %q", gaps, tc.reason)
			}
			if g := gaps[0]; g.LastEnvelope != id || g.LastSeq == 0 || g.DisconnectedAt.After(*g.NoticedAt) {
				t.Errorf("gap %+v: want a window from %s, before the loss was noticed", g, id)
			}
			if g := gaps[0]; ledger.GapID(gapOf(g)) != g.ID {
				t.Errorf("gap id %s", g.ID)
			}
		})
	}
}
