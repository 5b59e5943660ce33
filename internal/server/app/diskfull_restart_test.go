package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/subjects"
)

// TestJetStreamRestartKeepsOneAPIDispatcher: the restart that clears a
// full disk's write error (restartJetStream) leaves the JetStream API with
// one dispatcher, and the stream appends and answers after it. A
// server-wide ShutdownJetStream + EnableJetStream left the old
// dispatcher subscribed beside the new one: every API request was handled
// twice, and the old dispatcher raced with EnableJetStream (the data race
// the disk-full tests met under -race).
func TestJetStreamRestartKeepsOneAPIDispatcher(t *testing.T) {
	a := apptest.Start(t)
	ctx := testctx.Context(t)
	ns := a.NATSServer().NatsServer()
	subject := "$JS.API.STREAM.INFO." + subjects.StreamName
	if n := ns.SystemAccount().Interest(subject); n != 1 {
		t.Fatalf("%d JetStream API dispatchers before the restart, want 1", n)
	}
	for i := range 2 {
		if err := a.RestartJetStream(ctx); err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		if n := ns.SystemAccount().Interest(subject); n != 1 {
			t.Fatalf("%d JetStream API dispatchers after restart %d, want 1", n, i+1)
		}
	}
	if _, err := a.JetStream().Stream(ctx, subjects.StreamName); err != nil {
		t.Fatalf("the stream after the restarts: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.HTTPURL()+"/v1/events", strings.NewReader(
		`{"protocol":"mew/v0.4","id":"after-restart","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("append after the restarts: %d", resp.StatusCode)
	}
}
