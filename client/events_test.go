package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

// TestEvents: the event list of a space, paged in both orders, and one
// event's stored bytes.
func TestEvents(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(ledgerURL, client.WithDefaultSpace("events-client"))
	if err != nil {
		t.Fatal(err)
	}
	envs := []string{
		`{"protocol":"mew/v0.4","id":"ev-p1","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/hosts"}}}}`,
		`{"protocol":"mew/v0.4","id":"ev-w1","from":"agent","kind":"mcp/withdraw","correlation_id":["ev-p1"],"payload":{"reason":"no_longer_needed"}}`,
		`{"protocol":"mew/v0.4","id":"ev-f1","from":"human","kind":"mcp/request","correlation_id":["ev-nowhere"],"payload":{"method":"tools/call","params":{"name":"run"}}}`,
	}
	var last uint64
	for _, e := range envs {
		ack, err := c.Append(ctx, []byte(e))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Seq
	}
	// Read-your-writes through min_seq is not a filter of events: wait on stats.
	if _, err := c.Stats(ctx, client.WithMinSeq(last)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for e, err := range c.Events(ctx, client.EventFilter{Limit: 1, Desc: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID+"="+string(e.Effect))
	}
	if got := fmtList(ids); got != "ev-f1=orphan ev-w1=applied ev-p1=applied" {
		t.Errorf("events, newest first: %s", got)
	}
	page, err := c.EventsPage(ctx, client.EventFilter{Tool: "read_file"}, "")
	if err != nil || len(page.Events) != 1 || page.Events[0].Arg != "/etc/hosts" {
		t.Fatalf("tool=read_file: %+v %v", page, err)
	}
	raw, err := c.RawEventAt(ctx, page.Events[0].Seq, "")
	if err != nil || string(raw.Data) != envs[0] || raw.Event == nil || raw.Event.ID != "ev-p1" {
		t.Fatalf("raw: %+v %v", raw, err)
	}
	if _, err := c.RawEventAt(ctx, page.Events[0].Seq, "another-space"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("raw from another space: %v", err)
	}
}

func fmtList(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
