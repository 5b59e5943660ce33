package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("status of nothing: %v, want ErrUnreachable", err)
	}
	var e *api.Error
	if errors.As(err, &e) {
		t.Fatalf("unreachable reported as a ledger answer: %v", e)
	}
}

func TestOptions(t *testing.T) {
	if _, err := client.New("ftp://x"); !errors.Is(err, client.ErrOptions) {
		t.Fatalf("ftp API: %v", err)
	}
	c, err := client.New(ledgerURL + "/")
	if err != nil || strings.HasSuffix(c.API(), "/") {
		t.Fatalf("trailing slash: %v %q", err, c.API())
	}
	if c, _ := client.New(""); c.API() != client.DefaultAPI {
		t.Fatalf("default API %q", c.API())
	}
}

// TestAppendStreamOrder streams 500 lines with blank ones among them and
// checks every envelope is answered once, in order.
func TestAppendStreamOrder(t *testing.T) {
	c, err := client.New(ledgerURL, client.WithDefaultSpace("stream-order"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	const n = 500
	for i := range n {
		b.WriteString(`{"protocol":"mew/v0.4","id":"s-` + strconv.Itoa(i) + `","from":"agent","kind":"mcp/proposal","payload":{"method":"m"}}` + "\n")
		if i%100 == 0 {
			b.WriteString("\n") // blank lines are counted, not answered
		}
	}
	next := 1
	got := 0
	err = c.AppendStream(context.Background(), strings.NewReader(b.String()), func(r api.AppendResult) error {
		if r.Error != nil {
			return r.Error
		}
		if r.Line < next {
			t.Errorf("line %d after line %d", r.Line, next)
		}
		next = r.Line + 1
		got++
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("streamed %d of %d: %v", got, n, err)
	}
}

// TestRawAndDo: the …Raw reads return the ledger's JSON as sent, the Form
// filter reaches the server, and Do calls a route without a method of its
// own (an operation) with the client's error handling.
func TestRawAndDo(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(ledgerURL, client.WithDefaultSpace("raw-and-do"))
	if err != nil {
		t.Fatal(err)
	}
	ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"raw-1","from":"agent","to":["fs"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}`))
	if err != nil {
		t.Fatal(err)
	}
	ro := client.WithMinSeq(ack.Seq)
	raw, err := c.HistoryRaw(ctx, "raw-1", ro)
	if err != nil || !strings.Contains(string(raw), `"id":"raw-1"`) || !strings.Contains(string(raw), `"space":"raw-and-do"`) {
		t.Fatalf("history raw: %s %v", raw, err)
	}
	raw, err = c.ListPageRaw(ctx, client.ListFilter{Proposer: "agent"}, "", ro)
	var page api.List
	if err != nil || json.Unmarshal(raw, &page) != nil || len(page.Proposals) != 1 || page.Proposals[0].ID != "raw-1" {
		t.Fatalf("list raw: %s %v", raw, err)
	}
	raw, err = c.StatsRaw(ctx, ro)
	var st api.Stats
	if err != nil || json.Unmarshal(raw, &st) != nil || st.ByState["pending"] != 1 {
		t.Fatalf("stats raw: %s %v", raw, err)
	}
	// An mcp/proposal has no bid form: with the filter sent, nothing matches.
	p, err := c.ListPage(ctx, client.ListFilter{Form: "bid"}, "", ro)
	if err != nil || len(p.Proposals) != 0 {
		t.Fatalf("list form=bid: %+v %v", p, err)
	}

	var verify struct {
		OK  bool   `json:"ok"`
		Seq uint64 `json:"seq"`
	}
	if err := c.Do(ctx, "POST", "/v1/ops/verify", nil, nil, "", true, &verify); err != nil || !verify.OK || verify.Seq < ack.Seq {
		t.Fatalf("do verify: %+v %v", verify, err)
	}
	err = c.Do(ctx, "GET", "/v1/no-such-route", nil, nil, "", false, nil)
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("do on a missing route: %v, want api.ErrNotFound", err)
	}
}
