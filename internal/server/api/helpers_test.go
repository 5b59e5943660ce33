package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// ledgerT is an in-process ledger and its base URL.
type ledgerT struct {
	t   *testing.T
	app *app.App
	url string
}

func start(t *testing.T, edits ...func(*app.Options)) *ledgerT {
	t.Helper()
	a := apptest.Start(t, edits...)
	return &ledgerT{t: t, app: a, url: a.HTTPURL()}
}

// noRedirects shows the API's own answers, redirects included.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends a request and returns the status, headers and body.
func (l *ledgerT) do(method, path, contentType string, body []byte) (int, http.Header, []byte) {
	l.t.Helper()
	req, err := http.NewRequest(method, l.url+path, bytes.NewReader(body))
	if err != nil {
		l.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if len(body) > 1<<20 {
		// As curl does for a large body: the server may refuse it by its
		// Content-Length alone (413) and close the connection; without
		// waiting for "100 Continue" the client would still be writing
		// the body then, and could see the reset instead of the answer.
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		l.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// get GETs path, checks the status and decodes the body into out.
func (l *ledgerT) get(path string, want int, out any) {
	l.t.Helper()
	status, _, body := l.do(http.MethodGet, path, "", nil)
	if status != want {
		l.t.Fatalf("GET %s: status %d, want %d; body %s", path, status, want, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			l.t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
}

// post POSTs one envelope and expects 202.
func (l *ledgerT) post(env string) api.AppendResult {
	l.t.Helper()
	return l.postTo("", env)
}

func (l *ledgerT) postTo(space, env string) api.AppendResult {
	l.t.Helper()
	path := "/v1/events"
	if space != "" {
		path += "?space=" + space
	}
	status, _, body := l.do(http.MethodPost, path, "application/json", []byte(env))
	if status != http.StatusAccepted {
		l.t.Fatalf("POST %s: status %d, want 202; body %s", env, status, body)
	}
	var r api.AppendResult
	if err := json.Unmarshal(body, &r); err != nil {
		l.t.Fatal(err)
	}
	if r.Seq == 0 {
		l.t.Fatalf("POST %s: no seq in %s", env, body)
	}
	return r
}

// wantError checks an error answer: status, code and field.
func (l *ledgerT) wantError(method, path, contentType string, body []byte, status int, code, field string) *api.Error {
	l.t.Helper()
	st, h, data := l.do(method, path, contentType, body)
	if st != status {
		l.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, st, status, data)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		l.t.Errorf("%s %s: Content-Type %q, want JSON", method, path, ct)
	}
	var eb struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error == nil {
		l.t.Fatalf("%s %s: not an error body: %s", method, path, data)
	}
	for _, k := range []string{"code", "message", "field"} {
		if _, ok := eb.Error[k]; !ok {
			l.t.Errorf("%s %s: error has no %q member: %s", method, path, k, data)
		}
	}
	e := &api.Error{Code: fmt.Sprint(eb.Error["code"]), Message: fmt.Sprint(eb.Error["message"]), Field: fmt.Sprint(eb.Error["field"])}
	if e.Code != code || e.Field != field {
		l.t.Fatalf("%s %s: error code %q field %q, want %q %q (%s)", method, path, e.Code, e.Field, code, field, e.Message)
	}
	if e.Message == "" {
		l.t.Errorf("%s %s: empty message", method, path)
	}
	return e
}

// The MEW v0.4 golden sequence (contract §2, §7).
const (
	goldenProposal = `{"protocol":"mew/v0.4","id":"env-req-1","ts":"2026-01-02T03:04:05Z","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":"hi"}}}}`
	goldenFulfil   = `{"protocol":"mew/v0.4","id":"env-fulfill-1","from":"human-user","to":["target-agent"],"kind":"mcp/request","correlation_id":["env-req-1"],"payload":{"jsonrpc":"2.0","id":789,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":"hi"}}}}`
	goldenResponse = `{"protocol":"mew/v0.4","id":"env-resp-1","from":"target-agent","to":["human-user"],"kind":"mcp/response","correlation_id":["env-fulfill-1"],"payload":{"jsonrpc":"2.0","id":789,"result":{"content":[{"type":"text","text":"ok"}]}}}`
)

func proposal(id, from string, to []string, method string) string {
	tos, _ := json.Marshal(to)
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"to":%s,"kind":"mcp/proposal","payload":{"method":%q,"params":{"name":"x"}}}`, id, from, tos, method)
}

func withdraw(id, from, target, reason string) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"kind":"mcp/withdraw","correlation_id":[%q],"payload":{"reason":%q}}`, id, from, target, reason)
}

func reject(id, from, target, reason string) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"kind":"mcp/reject","correlation_id":[%q],"payload":{"reason":%q}}`, id, from, target, reason)
}

func fulfil(id, from, target, method string) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"kind":"mcp/request","correlation_id":[%q],"payload":{"method":%q,"params":{"name":"x"}}}`, id, from, target, method)
}

func chat(id, from, target, text string) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"kind":"chat","correlation_id":[%q],"payload":{"text":%q}}`, id, from, target, text)
}

// kernel is a kernel proposal (contract §12) valid until 2100.
func kernel(id, from, action, resourceType, domain string) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":%q,"kind":"kernel/proposal","payload":{"proposal_id":%q,"ts_ms":1705171200000,"actor":%q,"action_type":%q,"target":{"resource_type":%q,"resource_id":"r-1","domain":%q,"constraints":{}},"parameters":{"k":"v"},"risk_envelope":{"allowed_side_effects":[],"forbidden_effects":[],"max_affected_records":1,"reversible_required":true},"time_window":{"valid_from_ms":1705171200000,"valid_until_ms":4102444800000,"max_duration_ms":30000},"approval_class":"none"}}`,
		id, from, id, from, action, resourceType, domain)
}
