package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/mcp"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/ledger"
)

// The tests run a whole ledger in-process (real NATS, real Pebble, the
// HTTP API with tokens), and drive the MCP server with the SDK's own
// client: over streamable HTTP at the ledger's /mcp, and over stdio
// through the real `ledger mcp` binary.

const (
	tokAuditor = "auditor-secret"
	tokWriter  = "writer-secret"
	tokTeamA   = "team-a-secret" // auditor, limited to space team-a
)

// startLedger runs a ledger whose API needs tokens, with proposals in
// every state, an anomaly and a recording gap.
func startLedger(t *testing.T) (*app.App, *client.Client) {
	t.Helper()
	guard, err := httpauth.New(httpauth.Config{DefaultSpace: app.DefaultSpace, Tokens: []httpauth.Token{
		{Name: "auditor", SHA256: httpauth.HashToken(tokAuditor), Roles: []httpauth.Role{httpauth.RoleAuditor}},
		{Name: "writer", SHA256: httpauth.HashToken(tokWriter), Roles: []httpauth.Role{httpauth.RoleWriter}},
		{Name: "team-a", SHA256: httpauth.HashToken(tokTeamA), Roles: []httpauth.Role{httpauth.RoleAuditor}, Spaces: []string{"team-a"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) { return guard.Protect(guard.Rules(), next) }
	})
	w, err := client.New(a.HTTPURL(), client.WithToken(tokWriter))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{
		proposal("mcp-pending"),
		proposal("mcp-fulfilled"), fulfil("mcp-fulfilled", "f-1"),
		proposal("mcp-withdrawn"), withdrawEnv,
		fulfil("mcp-withdrawn", "f-2"), // after the withdrawal: fulfilled_after_withdrawn
		proposal("mcp-rejected"), reject("mcp-rejected", "r-1"),
	} {
		append1(t, w, env, "")
	}
	append1(t, w, proposal("mcp-team"), "team-a")
	raw, err := ledger.GapEnvelope(ledger.Gap{Bridge: "rec", MEWSpace: "demo", Gateway: "ws://gw", LastEnvelope: "env-9",
		DisconnectedAt: time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC), Reason: "read: EOF"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Appender().AppendSystem(context.Background(), "", raw)
	if err != nil {
		t.Fatal(err)
	}
	waitApplied(t, a, res.Seq)
	return a, w
}

// withdrawEnv withdraws mcp-withdrawn.
const withdrawEnv = `{"protocol":"mew/v0.4","id":"w-1","from":"agent-a","kind":"mcp/withdraw","correlation_id":["mcp-withdrawn"],"payload":{"reason":"changed my mind"}}`

func proposal(id string) string {
	return `{"protocol":"mew/v0.4","id":"` + id + `","from":"agent-a","to":["fs"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`
}

func fulfil(id, eid string) string {
	return `{"protocol":"mew/v0.4","id":"` + eid + `","from":"human","to":["fs"],"kind":"mcp/request","correlation_id":["` + id + `"],"payload":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`
}

func reject(id, eid string) string {
	return `{"protocol":"mew/v0.4","id":"` + eid + `","from":"fs-agent","kind":"mcp/reject","correlation_id":["` + id + `"],"payload":{"reason":"unsafe"}}`
}

func append1(t *testing.T, w *client.Client, env, space string) uint64 {
	t.Helper()
	ack, err := w.Append(context.Background(), []byte(env), client.WithSpace(space))
	if err != nil {
		t.Fatalf("append %s: %v", env, err)
	}
	return ack.Seq
}

func waitApplied(t *testing.T, a *app.App, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Store().WaitApplied(ctx, seq); err != nil {
		t.Fatalf("projection did not reach seq %d: %v", seq, err)
	}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// session is a connected MCP client with what its handlers received.
type session struct {
	*sdk.ClientSession
	updates  chan string // resource URIs updated
	progress chan string // progress messages
}

func newClient() (*sdk.Client, *session) {
	s := &session{updates: make(chan string, 16), progress: make(chan string, 16)}
	c := sdk.NewClient(&sdk.Implementation{Name: "ledger-test", Version: "1"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			s.updates <- r.Params.URI
		},
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			s.progress <- r.Params.Message
		},
	})
	return c, s
}

// connectHTTP connects to the ledger's /mcp with token.
func connectHTTP(t *testing.T, a *app.App, token, version string) (*session, error) {
	t.Helper()
	c, s := newClient()
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint:   a.HTTPURL() + mcp.Route,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}},
		MaxRetries: -1,
	}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.ClientSession = cs
	return s, nil
}

// connectStdio runs the real binary's `ledger mcp` against the ledger.
func connectStdio(t *testing.T, a *app.App, bin, token, version string) *session {
	t.Helper()
	cmd := exec.Command(bin, "mcp", "--api", a.HTTPURL())
	cmd.Env = append(cleanEnv(), "LEDGER_TOKEN="+token)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	c, s := newClient()
	cs, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to ledger mcp: %v\nstderr: %s", err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Logf("close ledger mcp: %v", err)
		}
		// Stdout is the protocol: the "which ledger" line is on stderr.
		if !strings.Contains(stderr.String(), a.HTTPURL()) {
			t.Errorf("ledger mcp's stderr does not say which ledger: %q", stderr.String())
		}
	})
	s.ClientSession = cs
	return s
}

// call calls a tool and checks its result: structured content valid
// against the tool's advertised output schema, a text rendering, and an
// error or not as wanted. It returns the structured content decoded into
// a map, or the error text.
func call(t *testing.T, s *session, schemas map[string]*jsonschema.Schema, name string, args map[string]any, wantErr bool) (map[string]any, string) {
	t.Helper()
	m, text, _ := callResult(t, s, schemas, name, args, wantErr)
	return m, text
}

// callResult is call, with the whole result (its content blocks).
func callResult(t *testing.T, s *session, schemas map[string]*jsonschema.Schema, name string, args map[string]any, wantErr bool) (map[string]any, string, *sdk.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", name, args, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError != wantErr {
		t.Fatalf("%s(%v): isError %v, want %v: %s", name, args, res.IsError, wantErr, text)
	}
	if wantErr {
		return nil, text, res
	}
	if text == "" {
		t.Errorf("%s: no text rendering", name)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas[name].Validate(v); err != nil {
		t.Errorf("%s: the structured content does not match the advertised output schema: %v\n%s", name, err, raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: structured content is not an object: %s", name, raw)
	}
	return m, text, res
}

// toolSchemas lists the tools and compiles their output schemas.
func toolSchemas(t *testing.T, s *session) map[string]*jsonschema.Schema {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"get_proposal", "proposal_history", "list_proposals", "stats", "list_anomalies", "list_gaps", "list_events", "get_event", "prove_proposal", "wait_for_decision"}
	out := map[string]*jsonschema.Schema{}
	c := jsonschema.NewCompiler()
	for _, tool := range res.Tools {
		if tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s: input or output schema missing", tool.Name)
			continue
		}
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("tool %s is not marked read-only", tool.Name)
		}
		for i, sc := range []any{tool.InputSchema, tool.OutputSchema} {
			raw, _ := json.Marshal(sc)
			var tree any
			_ = json.Unmarshal(raw, &tree)
			if p := boolSchema(tree, ""); p != "" {
				t.Errorf("tool %s: schema %d has a boolean subschema at %s (the TypeScript SDK refuses them)", tool.Name, i, p)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			url := fmt.Sprintf("mem:///%s/%d.json", tool.Name, i)
			if err := c.AddResource(url, doc); err != nil {
				t.Fatal(err)
			}
			compiled, err := c.Compile(url)
			if err != nil {
				t.Fatalf("tool %s: schema %d does not compile: %v", tool.Name, i, err)
			}
			if i == 1 {
				out[tool.Name] = compiled
			}
		}
	}
	for _, n := range want {
		if out[n] == nil {
			t.Errorf("tool %s not listed", n)
		}
	}
	if len(res.Tools) != len(want) {
		t.Errorf("%d tools listed, want %d", len(res.Tools), len(want))
	}
	return out
}

// boolSchema returns the path of a boolean subschema (a property or items
// schema true or false) in a schema, or "".
func boolSchema(v any, path string) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, p := range props {
			if _, isBool := p.(bool); isBool {
				return path + "/properties/" + k
			}
			if r := boolSchema(p, path+"/properties/"+k); r != "" {
				return r
			}
		}
	}
	if it, ok := m["items"]; ok {
		if _, isBool := it.(bool); isBool {
			return path + "/items"
		}
		return boolSchema(it, path+"/items")
	}
	return ""
}

// checkTools calls every tool on the seeded data.
func checkTools(t *testing.T, s *session) {
	sc := toolSchemas(t, s)

	p, text := call(t, s, sc, "get_proposal", map[string]any{"id": "mcp-rejected"}, false)
	if p["state"] != "rejected" || p["decided_by"] != "fs-agent" || p["reason"] != "unsafe" {
		t.Errorf("get_proposal: %v", p)
	}
	if !strings.Contains(text, "rejected by fs-agent") {
		t.Errorf("get_proposal text: %q", text)
	}

	h, _ := call(t, s, sc, "proposal_history", map[string]any{"id": "mcp-withdrawn"}, false)
	if evs, _ := h["events"].([]any); len(evs) != 3 || h["truncated"] != false {
		t.Errorf("proposal_history: %v", h)
	}
	h, _ = call(t, s, sc, "proposal_history", map[string]any{"id": "mcp-withdrawn", "limit": 2}, false)
	if evs, _ := h["events"].([]any); len(evs) != 2 || h["truncated"] != true || h["total"] != float64(3) {
		t.Errorf("proposal_history limit 2: %v", h)
	}
	next := h["next_after_seq"]
	h, _ = call(t, s, sc, "proposal_history", map[string]any{"id": "mcp-withdrawn", "after_seq": next}, false)
	if evs, _ := h["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["effect"] != "late" {
		t.Errorf("proposal_history after %v: %v", next, h)
	}

	l, _ := call(t, s, sc, "list_proposals", map[string]any{"limit": 2}, false)
	if l["count"] != float64(2) || l["truncated"] != true || l["next_cursor"] == "" {
		t.Errorf("list_proposals page 1: %v", l)
	}
	l2, _ := call(t, s, sc, "list_proposals", map[string]any{"limit": 2, "cursor": l["next_cursor"]}, false)
	if l2["count"] != float64(2) || l2["truncated"] != false || l2["next_cursor"] != nil {
		t.Errorf("list_proposals page 2 (the last): %v", l2)
	}
	l, _ = call(t, s, sc, "list_proposals", map[string]any{"state": "pending"}, false)
	if ps, _ := l["proposals"].([]any); len(ps) != 1 || ps[0].(map[string]any)["id"] != "mcp-pending" {
		t.Errorf("list_proposals pending: %v", l)
	}

	st, _ := call(t, s, sc, "stats", map[string]any{}, false)
	if st["proposals"] != float64(4) || st["gaps"] != float64(1) {
		t.Errorf("stats: %v", st)
	}

	an, _ := call(t, s, sc, "list_anomalies", map[string]any{}, false)
	ps, _ := an["proposals"].([]any)
	if len(ps) != 1 || ps[0].(map[string]any)["id"] != "mcp-withdrawn" || an["counts"].(map[string]any)["fulfilled_after_withdrawn"] != float64(1) {
		t.Errorf("list_anomalies: %v", an)
	}
	an, _ = call(t, s, sc, "list_anomalies", map[string]any{"anomaly": "fulfilled_after_withdrawn"}, false)
	if an["count"] != float64(1) {
		t.Errorf("list_anomalies fulfilled_after_withdrawn: %v", an)
	}

	g, _ := call(t, s, sc, "list_gaps", map[string]any{}, false)
	if gs, _ := g["gaps"].([]any); len(gs) != 1 || gs[0].(map[string]any)["bridge"] != "rec" || gs[0].(map[string]any)["covered"] != false {
		t.Errorf("list_gaps: %v", g)
	}
	if hs, ok := g["holes"].([]any); !ok || len(hs) != 1 || hs[0].(map[string]any)["recorders"].([]any)[0] != "rec" {
		t.Errorf("list_gaps holes: %v", g)
	}

	checkEvents(t, s, sc)

	w, _ := call(t, s, sc, "wait_for_decision", map[string]any{"id": "mcp-fulfilled"}, false)
	if w["decided"] != true || w["state"] != "fulfilled" || w["decided_by"] != "human" {
		t.Errorf("wait_for_decision on a decided proposal: %v", w)
	}
	w, text = call(t, s, sc, "wait_for_decision", map[string]any{"id": "mcp-pending", "timeout_seconds": 0.5}, false)
	if w["decided"] != false || w["timed_out"] != true || w["state"] != "pending" || !strings.Contains(text, "Still pending") {
		t.Errorf("wait_for_decision timing out: %v %q", w, text)
	}

	// Bad arguments: refused with the API's code and the field.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_proposal", map[string]any{"id": "nope"}, `not_found: no proposal "nope" in space "default" (field id)`},
		{"get_proposal", map[string]any{"id": ""}, "bad_request: id is required"},
		{"get_proposal", map[string]any{}, `missing properties: ["id"]`},
		{"get_proposal", map[string]any{"id": "x", "colour": "red"}, "colour"},
		{"list_proposals", map[string]any{"state": "bogus"}, `bad_query: unknown state "bogus"`},
		{"list_proposals", map[string]any{"limit": 5000}, "bad_request: limit must be in 1..200 (default 20), not 5000 (field limit)"},
		{"list_proposals", map[string]any{"since": "yesterday"}, "(field since)"},
		{"list_anomalies", map[string]any{"cursor": "abc"}, "(field cursor)"},
		{"list_anomalies", map[string]any{"anomaly": "weird"}, `bad_query: unknown anomaly "weird"`},
		{"wait_for_decision", map[string]any{"id": "mcp-pending", "timeout_seconds": 100000}, "(field timeout_seconds)"},
		{"list_proposals", map[string]any{"space": "team a/\x00"}, "(field space)"},
		{"list_events", map[string]any{"effect": "bogus"}, `effect "bogus" is not one of`},
		{"list_events", map[string]any{"order": "sideways"}, "(field order)"},
		{"list_events", map[string]any{"limit": 500}, "bad_request: limit must be in 1..200 (default 50), not 500 (field limit)"},
		{"list_events", map[string]any{"since_seq": -1}, "since_seq"},
		{"list_events", map[string]any{"cursor": "not-a-cursor"}, "(field cursor)"},
		{"get_event", map[string]any{}, `missing properties: ["seq"]`},
		{"get_event", map[string]any{"seq": 0}, "bad_request: seq is required"},
		{"get_event", map[string]any{"seq": 99999}, "not_found: the stream holds no message at seq 99999 (field seq)"},
		{"prove_proposal", map[string]any{"id": "nope"}, `not_found: no events filed under "nope" in space "default" (field id)`},
		{"prove_proposal", map[string]any{"id": ""}, "bad_request: id is required"},
		{"prove_proposal", map[string]any{"id": "mcp-pending", "size": -1}, "bad_request: size must be a tree size (0: the latest checkpoint), not -1 (field size)"},
		{"prove_proposal", map[string]any{"id": "mcp-pending", "size": 1000000}, "no checkpoint of tree size 1000000 (field size)"},
	} {
		_, text := call(t, s, sc, c.tool, c.args, true)
		if !strings.Contains(text, c.want) {
			t.Errorf("%s(%v): %q, want it to say %q", c.tool, c.args, text, c.want)
		}
	}
}

// checkEvents: list_events filters, pages and orders the ledger's log;
// get_event answers an event's original bytes.
func checkEvents(t *testing.T, s *session, sc map[string]*jsonschema.Schema) {
	t.Helper()
	ids := func(m map[string]any) []string {
		var out []string
		for _, e := range m["events"].([]any) {
			out = append(out, e.(map[string]any)["id"].(string))
		}
		return out
	}
	e, text := call(t, s, sc, "list_events", map[string]any{"proposal": "mcp-withdrawn"}, false)
	if got := ids(e); !slices.Equal(got, []string{"mcp-withdrawn", "w-1", "f-2"}) || e["truncated"] != false || e["count"] != float64(3) {
		t.Errorf("list_events proposal: %v", e)
	}
	if !strings.Contains(text, "3 events") || !strings.Contains(text, "f-2 from human (write_file): late under mcp-withdrawn") {
		t.Errorf("list_events text: %q", text)
	}
	e, _ = call(t, s, sc, "list_events", map[string]any{"proposal": "mcp-withdrawn", "order": "desc", "limit": 2}, false)
	if got := ids(e); !slices.Equal(got, []string{"f-2", "w-1"}) || e["truncated"] != true || e["next_cursor"] == nil {
		t.Errorf("list_events desc page 1: %v", e)
	}
	e, _ = call(t, s, sc, "list_events", map[string]any{"proposal": "mcp-withdrawn", "order": "desc", "limit": 2, "cursor": e["next_cursor"]}, false)
	if got := ids(e); !slices.Equal(got, []string{"mcp-withdrawn"}) || e["truncated"] != false || e["next_cursor"] != nil {
		t.Errorf("list_events desc page 2 (the last): %v", e)
	}
	e, _ = call(t, s, sc, "list_events", map[string]any{"from": "human"}, false)
	if got := ids(e); !slices.Equal(got, []string{"f-1", "f-2"}) {
		t.Errorf("list_events from human: %v", got)
	}
	e, _ = call(t, s, sc, "list_events", map[string]any{"anomaly": "fulfilled_after_withdrawn"}, false)
	evs, _ := e["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["id"] != "f-2" || evs[0].(map[string]any)["effect"] != "late" {
		t.Fatalf("list_events anomaly: %v", e)
	}
	late := evs[0].(map[string]any)
	seq := late["seq"].(float64)
	e, _ = call(t, s, sc, "list_events", map[string]any{"since_seq": seq, "until_seq": seq}, false)
	if got := ids(e); !slices.Equal(got, []string{"f-2"}) {
		t.Errorf("list_events since_seq..until_seq %v: %v", seq, got)
	}
	e, _ = call(t, s, sc, "list_events", map[string]any{"kind": "mcp/proposal"}, false)
	if got := ids(e); len(got) != 4 || slices.Contains(got, "mcp-team") {
		t.Errorf("list_events of the default space: %v", got)
	}
	e, _ = call(t, s, sc, "list_events", map[string]any{"kind": "mcp/proposal", "space": "*"}, false)
	if got := ids(e); len(got) != 5 || !slices.Contains(got, "mcp-team") {
		t.Errorf("list_events of every space: %v", got)
	}
	team := e["events"].([]any)[slices.Index(ids(e), "mcp-team")].(map[string]any)

	// get_event: the original bytes, their digest and the index record.
	g, text := call(t, s, sc, "get_event", map[string]any{"seq": seq}, false)
	sum := sha256.Sum256([]byte(fulfil("mcp-withdrawn", "f-2")))
	if g["text"] != fulfil("mcp-withdrawn", "f-2") || g["sha256"] != hex.EncodeToString(sum[:]) || g["truncated"] != false ||
		g["size"] != float64(len(fulfil("mcp-withdrawn", "f-2"))) || g["event"].(map[string]any)["effect"] != "late" ||
		!strings.HasPrefix(g["subject"].(string), "ledger.default.") {
		t.Errorf("get_event %v: %v", seq, g)
	}
	if !strings.Contains(text, hex.EncodeToString(sum[:])) || !strings.Contains(text, `"id":"f-2"`) {
		t.Errorf("get_event text: %q", text)
	}
	// Another space's event: not found unless asked for in it (or *).
	if _, text := call(t, s, sc, "get_event", map[string]any{"seq": team["seq"]}, true); !strings.HasPrefix(text, "not_found:") || !strings.Contains(text, "(field seq)") {
		t.Errorf("get_event of another space's event: %q", text)
	}
	if g, _ := call(t, s, sc, "get_event", map[string]any{"seq": team["seq"], "space": "*"}, false); g["text"] != proposal("mcp-team") {
		t.Errorf("get_event space *: %v", g)
	}
}

// checkProve: prove_proposal answers a bundle (embedded) that the
// verifier of client/evidence accepts with the ledger's key, holding the
// proposal's events byte for byte; an edited bundle is refused.
func checkProve(t *testing.T, s *session, sc map[string]*jsonschema.Schema, key string) {
	t.Helper()
	p, _, res := callResult(t, s, sc, "prove_proposal", map[string]any{"id": "mcp-withdrawn"}, false)
	if len(res.Content) != 2 {
		t.Fatalf("prove_proposal: %d content blocks, want text and the bundle", len(res.Content))
	}
	er, ok := res.Content[1].(*sdk.EmbeddedResource)
	if !ok || er.Resource == nil || er.Resource.MIMEType != "application/json" || er.Resource.URI != p["bundle_uri"] {
		t.Fatalf("prove_proposal: the second block is not the bundle: %#v", res.Content[1])
	}
	raw := []byte(er.Resource.Text)
	b, err := evidence.ParseBundle(raw)
	if err != nil {
		t.Fatalf("the embedded bundle: %v", err)
	}
	v, err := evidence.VerifyBundle(b, key)
	if err != nil {
		t.Fatalf("the embedded bundle does not verify with the ledger's key: %v", err)
	}
	want := []string{proposal("mcp-withdrawn"), withdrawEnv, fulfil("mcp-withdrawn", "f-2")}
	if len(v.Leaves) != len(want) {
		t.Fatalf("%d events proven, want %d", len(v.Leaves), len(want))
	}
	for i, l := range v.Leaves {
		if string(l.Data) != want[i] {
			t.Errorf("proven event %d: %s, want %s", i, l.Data, want[i])
		}
	}
	keyName, _, _ := strings.Cut(key, "+")
	if p["checkpoint"] != b.Checkpoint || p["tree_size"] != float64(v.Checkpoint.Size) || p["root_hash"] != v.Checkpoint.Hash.String() ||
		p["origin"] != v.Checkpoint.Origin || p["verifier_key"] != key || p["count"] != float64(3) || p["bundle_bytes"] != float64(len(raw)) {
		t.Errorf("prove_proposal summary: %v", p)
	}
	if names, _ := p["key_names"].([]any); len(names) != 1 || names[0] != keyName {
		t.Errorf("key_names %v, want [%s]", p["key_names"], keyName)
	}
	// Against a named checkpoint (the one just used): the same tree.
	if p2, _ := call(t, s, sc, "prove_proposal", map[string]any{"id": "mcp-withdrawn", "size": p["tree_size"]}, false); p2["tree_size"] != p["tree_size"] || p2["root_hash"] != p["root_hash"] || p2["count"] != float64(3) {
		t.Errorf("prove_proposal at size %v: %v", p["tree_size"], p2)
	}
	// An edited bundle: the verifier refuses it (the check above can fail).
	edited := strings.Replace(er.Resource.Text, `changed my mind`, `changed my mine`, 1)
	if eb, err := evidence.ParseBundle([]byte(edited)); err != nil || edited == er.Resource.Text {
		t.Fatalf("editing the bundle: %v", err)
	} else if _, err := evidence.VerifyBundle(eb, key); err == nil {
		t.Error("an edited bundle verified")
	}
}

// checkWait: wait_for_decision returns when a fulfilment appended after
// the call started (the call read the proposal pending: its first
// progress notification says so) is folded.
func checkWait(t *testing.T, a *app.App, w *client.Client, s *session) {
	id := "mcp-wait-" + strings.ReplaceAll(t.Name(), "/", "-")
	waitApplied(t, a, append1(t, w, proposal(id), ""))
	type result struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		params := &sdk.CallToolParams{Name: "wait_for_decision", Arguments: map[string]any{"id": id, "timeout_seconds": 120}}
		params.SetProgressToken("wait-1")
		r, err := s.CallTool(context.Background(), params)
		done <- result{r, err}
	}()
	select {
	case msg := <-s.progress:
		if !strings.Contains(msg, "waiting for a decision") {
			t.Errorf("progress %q", msg)
		}
	case r := <-done:
		t.Fatalf("wait_for_decision returned before any decision: %+v %v", r.res, r.err)
	case <-time.After(60 * time.Second):
		t.Fatal("no progress notification from wait_for_decision")
	}
	seq := append1(t, w, fulfil(id, "f-"+id), "")
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("wait_for_decision not woken by the fulfilment")
	}
	if r.err != nil || r.res.IsError {
		t.Fatalf("wait_for_decision: %v %+v", r.err, r.res)
	}
	raw, _ := json.Marshal(r.res.StructuredContent)
	var out mcp.WaitOut
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Decided || out.TimedOut || out.State != "fulfilled" || out.DecidedBy != "human" || out.DecidedEvent != "f-"+id || out.Proposal.DecidedSeq != seq {
		t.Errorf("wait_for_decision: %s", raw)
	}
}

// checkResource: the proposal resource reads as the API's JSON, and a
// subscriber is told of a change folded after it subscribed.
func checkResource(t *testing.T, a *app.App, w *client.Client, s *session) {
	ctx := context.Background()
	tpl, err := s.ListResourceTemplates(ctx, nil)
	if err != nil || len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != mcp.ResourceTemplate {
		t.Fatalf("resource templates: %+v %v", tpl, err)
	}
	id := "mcp-res-" + strings.ReplaceAll(t.Name(), "/", "-")
	waitApplied(t, a, append1(t, w, proposal(id), ""))
	uri := mcp.ProposalURI("default", id)
	rr, err := s.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var p api.Proposal
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &p); err != nil || p.ID != id || p.State != "pending" || rr.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %s: %+v %v", uri, rr.Contents[0], err)
	}
	if _, err := s.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ProposalURI("default", "nope")}); err == nil {
		t.Error("reading a proposal that does not exist succeeded")
	}
	if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ProposalURI("default", "nope")}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("subscribing to a proposal that does not exist: %v", err)
	}
	append1(t, w, reject(id, "r-"+id), "")
	select {
	case got := <-s.updates:
		if got != uri {
			t.Errorf("update for %q, want %q", got, uri)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no notifications/resources/updated after the change")
	}
	if err := s.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
}

// Protocol versions the tests speak: the handshake era's newest (what
// MEW's bridge and most clients negotiate), and the SDK's latest.
// Resource subscriptions are checked with the first: under 2026-07-28 a
// subscription is a background subscriptions/listen stream whose start the
// client cannot await, so "a change after subscribing" has no defined
// moment to happen after.
const (
	legacyProtocol = "2025-11-25"
	latestProtocol = ""
)

// TestHTTP drives /mcp of an in-process `ledger serve` with tokens.
func TestHTTP(t *testing.T) {
	for _, version := range []string{legacyProtocol, latestProtocol} {
		t.Run("protocol="+version, func(t *testing.T) {
			a, w := startLedger(t)
			s, err := connectHTTP(t, a, tokAuditor, version)
			if err != nil {
				t.Fatal(err)
			}
			t.Run("tools", func(t *testing.T) { checkTools(t, s) })
			t.Run("prove", func(t *testing.T) { checkProve(t, s, toolSchemas(t, s), a.Proofs().VerifierKey()) })
			t.Run("wait", func(t *testing.T) { checkWait(t, a, w, s) })
			if version == legacyProtocol {
				t.Run("resource", func(t *testing.T) { checkResource(t, a, w, s) })
			}
		})
	}
}

// TestHTTPSubscriptions: under the latest protocol a subscription is a
// subscriptions/listen stream; the caller's token reaches the server's
// subscribe through the request's context; an update arrives after a
// change; unsubscribing and ending the session stop the watch stream.
func TestHTTPSubscriptions(t *testing.T) {
	a, w := startLedger(t)
	for _, version := range []string{legacyProtocol, latestProtocol} {
		t.Run("protocol="+version, func(t *testing.T) {
			s, err := connectHTTP(t, a, tokAuditor, version)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ids := []string{"sub-1-" + version, "sub-2-" + version}
			for _, id := range ids {
				waitApplied(t, a, append1(t, w, proposal(id), ""))
				if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ProposalURI("default", id)}); err != nil {
					t.Fatal(err)
				}
			}
			waitSubs(t, a, 2, 1) // two subscriptions, one space: one stream
			append1(t, w, reject(ids[1], "r-"+ids[1]), "")
			select {
			case got := <-s.updates:
				if got != mcp.ProposalURI("default", ids[1]) {
					t.Errorf("update for %q", got)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("no update")
			}
			for _, id := range ids {
				if err := s.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: mcp.ProposalURI("default", id)}); err != nil {
					t.Fatal(err)
				}
			}
			waitSubs(t, a, 0, 0)
			// A session that ends holding a subscription: dropped.
			if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ProposalURI("default", ids[0])}); err != nil {
				t.Fatal(err)
			}
			waitSubs(t, a, 1, 1)
			_ = s.Close()
			waitSubs(t, a, 0, 0)
		})
	}
}

// waitSubs waits until the /mcp server holds subs subscriptions served by
// watchers streams.
func waitSubs(t *testing.T, a *app.App, subs, watchers int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, w := a.MCP().Subscriptions()
		if s == subs && w == watchers {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions on %d watch streams, want %d on %d", s, w, subs, watchers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPAuth: /mcp needs a token with the auditor role, and a token
// limited to spaces reads its spaces only (the API's own checks, on the
// requests the tools make with the caller's token).
func TestHTTPAuth(t *testing.T) {
	a, _ := startLedger(t)
	for _, c := range []struct{ name, token, want string }{
		{"no token", "", "Unauthorized"},
		{"unknown token", "who-knows", "Unauthorized"},
		{"writer only", tokWriter, "Forbidden"},
	} {
		_, err := connectHTTP(t, a, c.token, legacyProtocol)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: connect: %v, want %s", c.name, err, c.want)
		}
	}
	s, err := connectHTTP(t, a, tokTeamA, legacyProtocol)
	if err != nil {
		t.Fatal(err)
	}
	sc := toolSchemas(t, s)
	_, text := call(t, s, sc, "get_proposal", map[string]any{"id": "mcp-pending"}, true)
	if !strings.HasPrefix(text, `forbidden: token "team-a" may not use space "default"`) {
		t.Errorf("out of scope: %q", text)
	}
	_, text = call(t, s, sc, "stats", map[string]any{"space": "team-b"}, true)
	if !strings.HasPrefix(text, "forbidden:") {
		t.Errorf("out of scope stats: %q", text)
	}
	p, _ := call(t, s, sc, "get_proposal", map[string]any{"id": "mcp-team", "space": "team-a"}, false)
	if p["id"] != "mcp-team" || p["space"] != "team-a" {
		t.Errorf("in scope: %v", p)
	}
	// The event log: every space (*) is refused to a token limited to
	// spaces; its own space is listed.
	if _, text = call(t, s, sc, "list_events", map[string]any{"space": "*"}, true); !strings.HasPrefix(text, "forbidden:") {
		t.Errorf("list_events of every space with a token limited to spaces: %q", text)
	}
	if _, text = call(t, s, sc, "get_event", map[string]any{"seq": 1, "space": "*"}, true); !strings.HasPrefix(text, "forbidden:") {
		t.Errorf("get_event in every space with a token limited to spaces: %q", text)
	}
	e, _ := call(t, s, sc, "list_events", map[string]any{"space": "team-a"}, false)
	if evs, _ := e["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["id"] != "mcp-team" {
		t.Errorf("list_events in scope: %v", e)
	}
	// A proposal's proof is per space: its own space's is answered (without
	// the verifier key, a whole-log route the token may not read), another's
	// refused.
	pr, _ := call(t, s, sc, "prove_proposal", map[string]any{"id": "mcp-team", "space": "team-a"}, false)
	if pr["count"] != float64(1) || pr["space"] != "team-a" || pr["verifier_key"] != nil {
		t.Errorf("prove_proposal in scope: %v", pr)
	}
	if _, text = call(t, s, sc, "prove_proposal", map[string]any{"id": "mcp-pending"}, true); !strings.HasPrefix(text, "forbidden:") {
		t.Errorf("prove_proposal out of scope: %q", text)
	}
	ctx := context.Background()
	if _, err := s.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.ProposalURI("default", "mcp-pending")}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("reading an out-of-scope resource: %v", err)
	}
	if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: mcp.ProposalURI("default", "mcp-pending")}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("subscribing to an out-of-scope resource: %v", err)
	}
}

// TestStdio drives the real binary's `ledger mcp` over stdio.
func TestStdio(t *testing.T) {
	bin := buildBinary(t)
	for _, version := range []string{legacyProtocol, latestProtocol} {
		t.Run("protocol="+version, func(t *testing.T) {
			a, w := startLedger(t)
			s := connectStdio(t, a, bin, tokAuditor, version)
			t.Run("tools", func(t *testing.T) { checkTools(t, s) })
			t.Run("prove", func(t *testing.T) { checkProve(t, s, toolSchemas(t, s), a.Proofs().VerifierKey()) })
			t.Run("wait", func(t *testing.T) { checkWait(t, a, w, s) })
			if version == legacyProtocol {
				t.Run("resource", func(t *testing.T) { checkResource(t, a, w, s) })
			}
		})
	}

	// A token without the role: every call refused with the API's code.
	a, _ := startLedger(t)
	s2 := connectStdio(t, a, bin, tokWriter, legacyProtocol)
	sc := toolSchemas(t, s2)
	if _, text := call(t, s2, sc, "stats", map[string]any{}, true); !strings.HasPrefix(text, "forbidden:") {
		t.Errorf("writer token: %q", text)
	}
	// No token: refused, saying how to give one.
	s3 := connectStdio(t, a, bin, "", legacyProtocol)
	if _, text := call(t, s3, sc, "get_proposal", map[string]any{"id": "mcp-pending"}, true); !strings.HasPrefix(text, "unauthorized:") || !strings.Contains(text, "LEDGER_TOKEN") {
		t.Errorf("no token: %q", text)
	}
}

// TestStdioMEWBridge speaks to `ledger mcp` exactly as MEW v0.11.0's
// bridge does (src/bridge/mcp-client.ts): newline-delimited JSON-RPC,
// initialize with protocolVersion "0.1.0" and roots/sampling
// capabilities, notifications/initialized, tools/list, then tools/call;
// every line the server writes on stdout must parse as JSON (the bridge
// drops any other).
func TestStdioMEWBridge(t *testing.T) {
	bin := buildBinary(t)
	a, _ := startLedger(t)
	cmd := exec.Command(bin, "mcp", "--api", a.HTTPURL())
	cmd.Env = append(cleanEnv(), "LEDGER_TOKEN="+tokAuditor)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // EOF ends the server
		if err := cmd.Wait(); err != nil {
			t.Errorf("ledger mcp: %v\n%s", err, stderr.String())
		}
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	send := func(msg string) {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// answer reads lines until the response to id.
	answer := func(id int) map[string]any {
		t.Helper()
		for lines.Scan() {
			var m map[string]any
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("a line on stdout is not JSON: %q", lines.Text())
			}
			if m["id"] == float64(id) {
				return m
			}
		}
		t.Fatalf("no answer to %d: %v\n%s", id, lines.Err(), stderr.String())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"0.1.0","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"mew-bridge","version":"0.1.0"}}}`)
	init := answer(1)
	res, _ := init["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if res == nil || caps["tools"] == nil || caps["resources"] == nil || res["protocolVersion"] == "" {
		t.Fatalf("initialize: %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
	list := answer(2)
	tools, _ := list["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 10 {
		t.Fatalf("tools/list: %v", list)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait_for_decision","arguments":{"id":"mcp-rejected"}}}`)
	call := answer(3)
	out, _ := call["result"].(map[string]any)
	sc, _ := out["structuredContent"].(map[string]any)
	if out["isError"] == true || sc["state"] != "rejected" || sc["decided_by"] != "fs-agent" {
		t.Fatalf("tools/call: %v", call)
	}
}

// The binary is built once for the package's tests (TestMain removes it).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinary builds cmd/ledger into a temporary directory (with -race
// when the test runs with it, so the build cache is shared), once.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "ledger-mcp-test-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "ledger")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/mewledger/ledger/cmd/ledger")
		cmd := exec.Command("go", args...)
		cmd.Env = cleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// cleanEnv is the environment without LEDGER_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGER_") {
			env = append(env, kv)
		}
	}
	return env
}

// syncBuffer is a bytes.Buffer safe for a process writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
