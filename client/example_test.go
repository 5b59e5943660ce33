package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/app"
)

// ledgerURL is the API of a real `ledger serve` (embedded NATS, Pebble)
// that TestMain runs for the examples; in your code it is the address of
// yours, such as client.DefaultAPI.
var ledgerURL string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	a, err := app.New(ctx, app.Options{DataDir: dir, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:-1", Logger: zerolog.Nop()})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	select {
	case <-a.Ready():
	case err := <-done:
		log.Fatalf("ledger: %v", err)
	case <-ctx.Done():
		log.Fatal("ledger not serving after a minute")
	}
	cancel()
	ledgerURL = a.HTTPURL()
	code := m.Run()
	_ = a.Close()
	<-done
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// An agent proposes an operation, a trusted participant fulfils it, and an
// auditor reads what happened, waiting for the projection to have folded
// the last append (read-your-writes).
func Example() {
	ctx := context.Background()
	c, err := client.New(client.Options{API: ledgerURL, Space: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"p-1","from":"agent","to":["fs"],"kind":"mcp/proposal",
		"payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`), nil); err != nil {
		log.Fatal(err)
	}
	ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"f-1","from":"human","to":["fs"],"kind":"mcp/request","correlation_id":["p-1"],
		"payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`), nil)
	if err != nil {
		log.Fatal(err)
	}
	p, err := c.Get(ctx, "p-1", &client.ReadOptions{MinSeq: ack.Seq})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.State, "by", p.DecidedBy, "with", p.DecidedEvent)
	// Output: fulfilled by human with f-1
}

// Many envelopes in one streamed request: one result per line, in order;
// a refused line does not stop the others, and a retry is a duplicate.
func ExampleClient_AppendMany() {
	ctx := context.Background()
	c, err := client.New(client.Options{API: ledgerURL, Space: "bulk"})
	if err != nil {
		log.Fatal(err)
	}
	proposal := []byte(`{"protocol":"mew/v0.4","id":"b-1","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call"}}`)
	results, err := c.AppendMany(ctx, [][]byte{
		proposal,
		[]byte(`{"protocol":"mew/v0.4","from":"agent","kind":"mcp/proposal","payload":{}}`),
		proposal,
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			fmt.Printf("line %d: refused %s (field %s)\n", r.Line, r.Err.Code, r.Err.Field)
			continue
		}
		fmt.Printf("line %d: stored %s, duplicate %v\n", r.Line, r.Ack.ID, r.Ack.Duplicate)
	}
	// Output:
	// line 1: stored b-1, duplicate false
	// line 2: refused missing_field (field id)
	// line 3: stored b-1, duplicate true
}

// A refusal carries the ledger's code and the field at fault.
func ExampleError() {
	c, err := client.New(client.Options{API: ledgerURL})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Append(context.Background(), []byte(`{"protocol":"mew/v0.4","id":"x","from":"agent","kind":"mcp/withdraw"}`), nil)
	var refusal *client.Error
	if errors.As(err, &refusal) {
		fmt.Println(refusal.Status, refusal.Code, refusal.Field, errors.Is(err, client.ErrRefused))
	}
	_, err = c.Get(context.Background(), "no-such-proposal", nil)
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// 400 missing_correlation correlation_id true
	// true
}

// List walks every page of a query as one loop.
func ExampleClient_List() {
	ctx := context.Background()
	c, err := client.New(client.Options{API: ledgerURL, Space: "listing"})
	if err != nil {
		log.Fatal(err)
	}
	var last uint64
	for _, id := range []string{"l-1", "l-2", "l-3"} {
		ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"`+id+`","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call"}}`), nil)
		if err != nil {
			log.Fatal(err)
		}
		last = ack.Seq
	}
	for p, err := range c.List(ctx, client.ListFilter{State: "pending", Limit: 2}, &client.ReadOptions{MinSeq: last}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(p.ID, p.State)
	}
	// Output:
	// l-3 pending
	// l-2 pending
	// l-1 pending
}

// Do calls a route this package has no method for, with the client's
// token and errors: here the operations endpoint that compares the live
// projection with a fold of the log (a token with the ops role, when the
// ledger runs with --auth). long lets it run past the client's timeout.
func ExampleClient_Do() {
	ctx := context.Background()
	c, err := client.New(client.Options{API: ledgerURL})
	if err != nil {
		log.Fatal(err)
	}
	var res struct {
		OK bool `json:"ok"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/ops/verify", nil, nil, "", true, &res); err != nil {
		log.Fatal(err)
	}
	fmt.Println("projection equals the log:", res.OK)
	// Output: projection equals the log: true
}
