package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/lib/mewgw"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// Tokens of the recorder tests.
const (
	recToken     = "rec-token"     // recorder of bridgeName only
	otherToken   = "other-token"   // recorder of another bridge
	writerToken  = "writer-token"  // writer
	auditorToken = "auditor-token" // auditor, ops
)

// withTokens runs the ledger with the recorder tests' tokens.
func withTokens(t *testing.T) func(*app.Options) {
	g, err := httpauth.New(httpauth.Config{
		Tokens: []httpauth.Token{
			{Name: "rec", SHA256: httpauth.HashToken(recToken), Roles: []httpauth.Role{httpauth.RoleRecorder}, Bridges: []string{bridgeName}},
			{Name: "other", SHA256: httpauth.HashToken(otherToken), Roles: []httpauth.Role{httpauth.RoleRecorder}, Bridges: []string{"other-recorder"}},
			{Name: "writer", SHA256: httpauth.HashToken(writerToken), Roles: []httpauth.Role{httpauth.RoleWriter}},
			{Name: "auditor", SHA256: httpauth.HashToken(auditorToken), Roles: []httpauth.Role{httpauth.RoleAuditor, httpauth.RoleOps}},
		},
		WriteLimit:   httpauth.RateConfig{PerSecond: -1},
		DefaultSpace: app.DefaultSpace,
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *app.Options) {
		o.HTTPAuthenticating = true
		o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) { return g.Protect(g.Rules(), next) }
	}
}

// post sends body to path with token (and a Ledger-Bridge mark when
// given) and returns the status and the error code.
func post(t *testing.T, base, path, token, mark, ctype string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", ctype)
	if mark != "" {
		req.Header.Set(ledger.HeaderBridge, mark)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e api.ErrorBody
	_ = json.Unmarshal(raw, &e)
	if e.Error == nil {
		return resp.StatusCode, string(raw)
	}
	return resp.StatusCode, e.Error.Code
}

// deadSink passes to a sink until killed; then nothing reaches the
// ledger (a bridge whose process died: its last gap is never recorded).
type deadSink struct {
	bridge.HTTPSink
	dead atomic.Bool
}

var errDead = errors.New("the bridge's process is gone")

func (s *deadSink) AppendBatch(ctx context.Context, space string, batch []bridge.Envelope) ([]api.AppendResult, error) {
	if s.dead.Load() {
		return nil, errDead
	}
	return s.HTTPSink.AppendBatch(ctx, space, batch)
}

func (s *deadSink) Gap(ctx context.Context, space string, g ledger.Gap) (api.AppendResult, error) {
	if s.dead.Load() {
		return api.AppendResult{}, errDead
	}
	return s.HTTPSink.Gap(ctx, space, g)
}

// TestRecorderSpeaksForItself (issue 38): under --auth, a bridge with a
// recorder token (and nothing else) starts and records; then every
// forging of its record is refused with its own code and counted — a
// crash hidden by a gap ending at last_seq 999999999999, a decoy gap at
// the bridge's last_received_at, a mark or gap report from a writer or
// another bridge's recorder, a mark and a gap dated in the future — and
// after the bridge dies without recording its end, its restart records
// the crash's gap from the real last envelope: every real gap is on the
// record, no forged one.
func TestRecorderSpeaksForItself(t *testing.T) {
	a := apptest.Start(t, withTokens(t))
	base := a.HTTPURL()
	aud, err := apitest.New(client.Options{API: base, Token: auditorToken})
	if err != nil {
		t.Fatal(err)
	}
	gw := mewgw.Start(nil)
	t.Cleanup(gw.Close)
	lines := readLines(t, filepath.Join(capturesDir, "c-reject.jsonl"))
	mew, space := mewSpace(t, "c-reject"), "recorders"
	hs, err := bridge.NewHTTPSink(base, recToken)
	if err != nil {
		t.Fatal(err)
	}
	sink := &deadSink{HTTPSink: hs}
	o := bridge.Options{Gateway: gw.URL(), MEWSpace: mew, Token: "t", Space: space, Sink: sink,
		ProbeInterval: 5 * time.Millisecond, StopTimeout: 200 * time.Millisecond}
	b, stop := startBridgeStop(t, o)
	waitJoined(t, gw, b, mew, 1) // it started: GET /v1/bridges with a recorder token
	replay(t, gw, b, mew, lines[:6])
	last := b.Health()
	if last.LastSeq == 0 || last.Appended == 0 {
		t.Fatalf("nothing recorded under --auth: %+v", last)
	}
	var rec []api.BridgeSession
	{
		out := struct {
			Bridges []api.BridgeSession `json:"bridges"`
		}{}
		if err := aud.Do(context.Background(), http.MethodGet, "/v1/bridges", map[string][]string{"space": {space}, "min_seq": {"latest"}}, nil, "", false, &out); err != nil {
			t.Fatal(err)
		}
		rec = out.Bridges
	}
	if len(rec) != 1 || rec[0].LastReceivedAt == nil || rec[0].State != api.BridgeRecording {
		t.Fatalf("bridges %+v", rec)
	}
	session := rec[0].Session

	// The bridge dies: nothing more reaches the ledger.
	sink.dead.Store(true)
	stop()

	gapq := "/v1/gaps?space=" + space
	gap := func(g ledger.Gap) []byte {
		raw, _ := json.Marshal(g)
		return raw
	}
	future := time.Now().Add(time.Hour)
	hide := ledger.Gap{Bridge: bridgeName, MEWSpace: mew, Session: session, LastSeq: 999999999999, DisconnectedAt: time.Now(), Reason: "bridge stopped"}
	decoy := ledger.Gap{Bridge: bridgeName, MEWSpace: mew, Session: session, LastEnvelope: rec[0].LastEnvelope, LastSeq: rec[0].LastSeq,
		DisconnectedAt: *rec[0].LastReceivedAt, Reason: "decoy"}
	mark := func(at time.Time) string {
		return ledger.BridgeMark{Bridge: bridgeName, MEWSpace: mew, Session: session, Received: at}.String()
	}
	forged := []byte(`{"protocol":"mew/v0.4","id":"forged-1","from":"mallory","kind":"chat","correlation_id":["` + idOf(t, lines[5]) + `"],"payload":{"text":"x"}}`)
	futureGap := decoy
	futureGap.DisconnectedAt, futureGap.Reason = future, "dated ahead"
	for _, tc := range []struct {
		name, path, token, mark string
		body                    []byte
		status                  int
		code                    string
	}{
		{"a writer hides the crash (last_seq 999999999999)", gapq, writerToken, "", gap(hide), http.StatusForbidden, "forbidden"},
		{"another bridge's recorder hides the crash", gapq, otherToken, "", gap(hide), http.StatusForbidden, ledger.CodeNotRecorder},
		{"the recorder's token hides the crash", gapq, recToken, "", gap(hide), http.StatusConflict, ledger.CodeGapAhead},
		{"a writer's decoy at last_received_at", gapq, writerToken, "", gap(decoy), http.StatusForbidden, "forbidden"},
		{"another recorder's decoy", gapq, otherToken, "", gap(decoy), http.StatusForbidden, ledger.CodeNotRecorder},
		{"a gap dated in the future", gapq, recToken, "", gap(futureGap), http.StatusBadRequest, ledger.CodeClockAhead},
		{"a writer's forged mark", "/v1/events?space=" + space, writerToken, mark(time.Now()), forged, http.StatusForbidden, ledger.CodeNotRecorder},
		{"another recorder's forged mark", "/v1/events?space=" + space, otherToken, mark(time.Now()), forged, http.StatusForbidden, ledger.CodeNotRecorder},
		{"a mark dated in the future", "/v1/events?space=" + space, recToken, mark(future), forged, http.StatusBadRequest, ledger.CodeClockAhead},
		{"a recorder writing without a mark", "/v1/events?space=" + space, recToken, "", forged, http.StatusForbidden, ledger.CodeNotRecorder},
	} {
		if status, code := post(t, base, tc.path, tc.token, tc.mark, "application/json", tc.body); status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, code, tc.status, tc.code)
		}
	}
	// The restart records the crash's gap from the real last envelope.
	sink.dead.Store(false)
	o.StopTimeout = 0
	b, _ = startBridgeStop(t, o)
	waitJoined(t, gw, b, mew, 2)
	waitFor(t, "the crash gap recorded", func() (bool, string) {
		h := b.Health()
		return h.Gaps >= 1, fmt.Sprintf("%+v", h)
	})
	// A decoy the bridge's own recorder sends afterwards, starting where
	// the crash gap starts, is another gap: it takes nothing's id.
	if status, code := post(t, base, gapq, recToken, "", "application/json", gap(decoy)); status != http.StatusAccepted {
		t.Fatalf("the recorder's own report: %d %s", status, code)
	}
	gaps := gapsOf(t, aud, space)
	if len(gaps) != 2 {
		t.Errorf("gaps %+v, want the crash's and the decoy", gaps)
	}
	var crash *api.Gap
	for i, g := range gaps {
		switch {
		case strings.Contains(g.Reason, "ended without recording"):
			crash = &gaps[i]
		case g.Reason == "decoy":
		default:
			t.Errorf("unexpected gap %+v", g)
		}
	}
	if crash == nil || crash.LastEnvelope != last.LastStored || crash.LastSeq != last.LastSeq || crash.Session != session {
		t.Fatalf("no crash gap from %s (seq %d): %+v", last.LastStored, last.LastSeq, gaps)
	}
	// Every refusal counted.
	var m string
	{
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+auditorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m = string(raw)
	}
	for code, n := range map[string]int{ledger.CodeNotRecorder: 5, ledger.CodeGapAhead: 1, ledger.CodeClockAhead: 2} {
		want := fmt.Sprintf(`ledger_events_refused_total{code=%q,path="http"} %d`, code, n)
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
