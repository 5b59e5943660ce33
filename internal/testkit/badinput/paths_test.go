package badinput_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/internal/testkit/crashrig"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// fieldless are the codes whose refusal may name no field: the whole body
// is at fault.
var fieldless = map[string]bool{api.CodeNotJSON: true, api.CodeInvalidUTF8: true, api.CodeOversize: true}

// checkRefusal checks one path's answer to a case.
func checkRefusal(t *testing.T, path string, c badinput.Case, e *api.Error) {
	t.Helper()
	switch {
	case e == nil:
		t.Errorf("%s %s: no error, want %s", path, c.Name, c.Want)
	case e.Code != c.Want:
		t.Errorf("%s %s: %s (%s, field %q), want %s", path, c.Name, e.Code, e.Message, e.Field, c.Want)
	case e.Message == "":
		t.Errorf("%s %s: %s without a message", path, c.Name, e.Code)
	case e.Field == "" && !fieldless[e.Code]:
		t.Errorf("%s %s: %s names no field (%s)", path, c.Name, e.Code, e.Message)
	}
}

func postJSON(t *testing.T, apiURL, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(apiURL+path, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func getJSON(t *testing.T, apiURL, path string, v any) int {
	t.Helper()
	resp, err := http.Get(apiURL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// fastSync: these tests are about validation and serving, not
// durability; an fsync per append costs ~8 ms on a small CI disk.
func fastSync(o *app.Options) { o.SyncInterval = time.Minute }

// validTraffic is the valid workload of the hostile run and its control.
func validTraffic() ([][]byte, []string) {
	g := workload.New(workload.Options{Seed: 77, Disorder: 10, Foreign: 20, Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
	return g.Batch(300), g.Proposals()
}

// essence is a proposal without sequences, times and counts of events
// filed under it: what hostile input must never change.
func essence(p *api.Proposal) *api.Proposal {
	c := p.Clone()
	c.CreatedSeq, c.UpdatedSeq, c.DecidedSeq, c.Events = 0, 0, 0, 0
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = time.Time{}, time.Time{}, nil
	for i := range c.Rejections {
		c.Rejections[i].Seq = 0
	}
	for i := range c.Fulfillments {
		c.Fulfillments[i].Seq = 0
		for j := range c.Fulfillments[i].Responses {
			c.Fulfillments[i].Responses[j].Seq = 0
		}
	}
	for i := range c.Approvals {
		c.Approvals[i].Seq = 0
	}
	if c.Withdrawal != nil {
		c.Withdrawal.Seq = 0
	}
	return c
}

func waitCaughtUp(t *testing.T, a *app.App) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st api.Status
		if getJSON(t, a.HTTPURL(), "/v1/status", &st) == http.StatusOK && st.Lag == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("projection not caught up after 60s: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostileThroughServicePaths sends the whole hostile corpus through
// every path of a running ledger (internal/server/app: embedded NATS, projector,
// submit service, HTTP API on real sockets) — POST /v1/events one by one,
// the same as one NDJSON body, the submit service's request/reply, and
// `ledger publish` (the real binary) — interleaved with valid traffic.
// Every refused case gets its specific code (400, 413 for oversize) with a
// message and the field; every hostile-but-legal one is stored; the server
// keeps serving, the projector keeps up, and the valid proposals end
// exactly as in a control ledger that saw only the valid traffic.
func TestHostileThroughServicePaths(t *testing.T) {
	cases, err := badinput.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	valid, ids := validTraffic()
	bin := crashrig.Build(t, t.TempDir(), false)

	ctl := apptest.Start(t, fastSync)
	for _, raw := range valid {
		if code, b := postJSON(t, ctl.HTTPURL(), "/v1/events", "application/json", raw); code != http.StatusAccepted {
			t.Fatalf("control: %d %s", code, b)
		}
	}
	waitCaughtUp(t, ctl)

	a := apptest.Start(t, fastSync)
	apiURL := a.HTTPURL()
	nc, _ := natstest.ConnectURL(t, a.NATSURL())
	per := len(cases)/len(valid) + 1
	next := 0
	counts := map[string]int{}
	for _, raw := range valid {
		if code, b := postJSON(t, apiURL, "/v1/events", "application/json", raw); code != http.StatusAccepted {
			t.Fatalf("valid envelope: %d %s", code, b)
		}
		for k := 0; k < per && next < len(cases); k++ {
			c := cases[next]
			next++

			// HTTP, one envelope.
			code, b := postJSON(t, apiURL, "/v1/events", "application/json", c.Data)
			if c.Refused() {
				want := http.StatusBadRequest
				if c.Want == api.CodeOversize {
					want = http.StatusRequestEntityTooLarge
				}
				var body api.ErrorBody
				if err := json.Unmarshal(b, &body); err != nil {
					t.Errorf("HTTP %s: body %q: %v", c.Name, b, err)
				}
				if code != want {
					t.Errorf("HTTP %s: status %d, want %d (%s)", c.Name, code, want, b)
				}
				checkRefusal(t, "HTTP", c, body.Error)
				counts["http refused"]++
			} else {
				var res api.AppendResult
				if code != http.StatusAccepted || json.Unmarshal(b, &res) != nil || res.Seq == 0 {
					t.Errorf("HTTP %s: %d %s, want 202", c.Name, code, b)
				}
				counts["http stored"]++
			}

			// The submit service.
			if len(c.Data) > natsserver.DefaultMaxPayload-1024 {
				counts["submit over max_payload"]++ // no NATS client can send it
			} else {
				msg, err := nc.Request(subjects.Submit(ledger.DefaultSpace), c.Data, 10*time.Second)
				if err != nil {
					t.Fatalf("submit %s: %v", c.Name, err)
				}
				var res api.AppendResult
				if err := json.Unmarshal(msg.Data, &res); err != nil {
					t.Errorf("submit %s: reply %q: %v", c.Name, msg.Data, err)
				}
				if c.Refused() {
					checkRefusal(t, "submit", c, res.Error)
					if h := msg.Header.Get("Nats-Service-Error-Code"); h != "400" {
						t.Errorf("submit %s: Nats-Service-Error-Code %q, want 400", c.Name, h)
					}
				} else if res.Error != nil || !res.Duplicate || res.Seq == 0 {
					t.Errorf("submit %s: %s, want a duplicate of the HTTP append", c.Name, msg.Data)
				}
				counts["submit"]++
			}
		}
	}

	// NDJSON: every single-line case in one body, one result per line.
	var body bytes.Buffer
	var lines []badinput.Case
	for _, c := range cases {
		if !oneLine(c.Data) {
			continue
		}
		body.Write(c.Data)
		body.WriteByte('\n')
		lines = append(lines, c)
	}
	code, b := postJSON(t, apiURL, "/v1/events", "application/x-ndjson", body.Bytes())
	if code != http.StatusOK {
		t.Fatalf("NDJSON: %d %s", code, b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for i, c := range lines {
		var res api.AppendResult
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("NDJSON result %d: %v", i+1, err)
		}
		if res.Line != i+1 {
			t.Errorf("NDJSON %s: result for line %d at position %d", c.Name, res.Line, i+1)
		}
		if c.Refused() {
			checkRefusal(t, "NDJSON", c, res.Error)
		} else if res.Error != nil || !res.Duplicate {
			t.Errorf("NDJSON %s: %+v, want a duplicate", c.Name, res)
		}
	}
	counts["ndjson lines"] = len(lines)

	// The CLI: the same lines through `ledger publish`.
	file := filepath.Join(t.TempDir(), "badinput.jsonl")
	if err := os.WriteFile(file, body.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "publish", "--api", apiURL, "-f", file)
	cmd.Env = crashrig.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("ledger publish: %v (want exit status 1)\nstderr: %s", err, stderr.String())
	}
	dec = json.NewDecoder(&stdout)
	for i, c := range lines {
		var res api.AppendResult
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("ledger publish result %d: %v", i+1, err)
		}
		if c.Refused() {
			checkRefusal(t, "CLI", c, res.Error)
			if prefix := fmt.Sprintf("line %d: %s", i+1, c.Want); !strings.Contains(stderr.String(), prefix) {
				t.Errorf("CLI %s: stderr does not say %q", c.Name, prefix)
			}
		} else if res.Error != nil {
			t.Errorf("CLI %s: %+v", c.Name, res)
		}
	}

	// Hostile spaces on the HTTP path.
	for _, sp := range []struct{ space, code string }{
		{strings.Repeat("s", ledger.MaxSpaceBytes+1), api.CodeTooLong},
		{"\xff", api.CodeInvalidUTF8},
	} {
		code, b := postJSON(t, apiURL, "/v1/events?space="+url.QueryEscape(sp.space), "application/json", valid[0])
		var eb api.ErrorBody
		_ = json.Unmarshal(b, &eb)
		if code != http.StatusBadRequest || eb.Error == nil || eb.Error.Code != sp.code || eb.Error.Field != "space" {
			t.Errorf("space %q: %d %s, want 400 %s field space", sp.space, code, b, sp.code)
		}
	}

	// Still serving, caught up, valid proposals unchanged.
	if code := getJSON(t, apiURL, "/healthz", nil); code != http.StatusOK {
		t.Fatalf("/healthz %d after the hostile corpus", code)
	}
	waitCaughtUp(t, a)
	compared := 0
	for _, id := range ids {
		want, errW := ctl.Store().Get(ledger.DefaultSpace, id)
		got, errG := a.Store().Get(ledger.DefaultSpace, id)
		if errors.Is(errW, projections.ErrNotFound) && errors.Is(errG, projections.ErrNotFound) {
			continue
		}
		if errW != nil || errG != nil {
			t.Errorf("%q: control %v, hostile %v", id, errW, errG)
			continue
		}
		compared++
		if x, y := essence(want), essence(got); !reflect.DeepEqual(x, y) {
			t.Errorf("%q changed:\ncontrol %+v\nhostile %+v", id, x, y)
		}
	}
	if compared < 100 {
		t.Fatalf("compared %d proposals", compared)
	}
	t.Logf("%d cases through HTTP, submit, NDJSON and the CLI: %v; %d valid proposals unchanged", len(cases), counts, compared)
}

// oneLine: the case fits on one JSON line (the CLI and NDJSON split on
// newlines and skip blank lines).
func oneLine(b []byte) bool {
	return !bytes.ContainsAny(b, "\n\r") && len(bytes.TrimSpace(b)) > 0
}

// TestStatusAndReadyzWhileProjectorPaused: with the projector paused while
// appends go on, /v1/status shows the lag, /readyz is 503 not_ready beyond
// the configured bound, reads keep answering; resumed, it catches up and
// /readyz is ready again.
func TestStatusAndReadyzWhileProjectorPaused(t *testing.T) {
	const bound = 100
	a := apptest.Start(t, fastSync, func(o *app.Options) { o.ReadyLag = bound })
	apiURL := a.HTTPURL()
	valid, ids := validTraffic()
	post := func(raws ...[]byte) uint64 {
		t.Helper()
		var body bytes.Buffer
		for _, r := range raws {
			body.Write(r)
			body.WriteByte('\n')
		}
		code, b := postJSON(t, apiURL, "/v1/events", "application/x-ndjson", body.Bytes())
		if code != http.StatusOK {
			t.Fatalf("NDJSON: %d %s", code, b)
		}
		var last uint64
		dec := json.NewDecoder(bytes.NewReader(b))
		for dec.More() {
			var res api.AppendResult
			if err := dec.Decode(&res); err != nil || res.Error != nil {
				t.Fatalf("append: %v %+v", err, res.Error)
			}
			last = max(last, res.Seq)
		}
		return last
	}
	post(valid[:50]...)
	waitCaughtUp(t, a)

	p := a.Projector()
	p.Pause()
	// Caught up and paused: nothing moves the checkpoint until Resume.
	held := a.Store().AppliedSeq()
	last := post(valid[50:]...)
	var st api.Status
	if code := getJSON(t, apiURL, "/v1/status", &st); code != http.StatusOK {
		t.Fatalf("/v1/status %d", code)
	}
	if st.StreamSeq != last || st.ProjectedSeq != held || st.Lag != last-held {
		t.Fatalf("status while paused %+v, want stream %d projected %d", st, last, held)
	}
	var rd api.Ready
	if code := getJSON(t, apiURL, "/readyz", &rd); code != http.StatusServiceUnavailable || rd.Ready || rd.Error == nil || rd.Error.Code != api.CodeNotReady || rd.Bound != bound {
		t.Fatalf("/readyz while %d behind (bound %d): %d %+v", st.Lag, bound, code, rd)
	}
	// Reads answer from the last commit.
	var prop api.Proposal
	if code := getJSON(t, apiURL, "/v1/proposals/"+url.PathEscape(ids[0]), &prop); code != http.StatusOK {
		t.Fatalf("read while paused: %d", code)
	}
	// A read that asks for the unfolded tail waits (bounded) and says so.
	resp, err := http.Get(apiURL + "/v1/proposals/" + url.PathEscape(ids[0]) + fmt.Sprintf("?min_seq=%d", last))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("min_seq beyond the paused projection: %d, want 503", resp.StatusCode)
	}

	p.Resume()
	deadline := time.Now().Add(30 * time.Second)
	for getJSON(t, apiURL, "/readyz", &rd) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready 30s after resume: %+v", rd)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitCaughtUp(t, a)
	t.Logf("paused at seq %d, %d appends later: status %+v, /readyz 503 beyond %d; resumed and ready", held, last-held, st, bound)
}
