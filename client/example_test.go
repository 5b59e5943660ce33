package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

// ledgerURL is the API of a real `ledger serve` (embedded NATS, Pebble)
// that TestMain runs for the examples; in your code it is the address of
// yours, such as client.DefaultAPI.
var ledgerURL string

// ledgerBin is the `ledger` binary TestMain built, for tests that start
// ledgers of their own (verify_test.go).
var ledgerBin string

// TestMain builds the ledger of this repository (the module one directory
// up: the client module links none of it) and runs `ledger serve` on free
// ports in a temporary directory for the examples and tests.
func TestMain(m *testing.M) {
	os.Exit(runWithLedger(m))
}

func runWithLedger(m *testing.M) int {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "ledger")
	ledgerBin = bin
	build := exec.Command("go", "build", "-o", bin, "./cmd/ledger")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		log.Fatalf("go build ./cmd/ledger: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	var logs syncBuffer
	serve := exec.Command(bin, "serve", "--data", data, "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:-1", "--log-format", "json")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGER_") {
			serve.Env = append(serve.Env, kv)
		}
	}
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = serve.Process.Kill()
			<-done
		}
	}()
	deadline := time.Now().Add(90 * time.Second)
	for ledgerURL == "" {
		var addr struct {
			HTTP string `json:"http"`
		}
		if b, err := os.ReadFile(filepath.Join(data, "serve.addr.json")); err == nil && json.Unmarshal(b, &addr) == nil && addr.HTTP != "" {
			ledgerURL = "http://" + addr.HTTP
			break
		}
		select {
		case err := <-done:
			log.Fatalf("ledger serve exited (%v) before serving:\n%s", err, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = serve.Process.Kill()
			<-done
			log.Fatalf("ledger serve not serving after 90s:\n%s", logs.String())
		}
	}
	return m.Run()
}

// syncBuffer is a bytes.Buffer safe for the process's output goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An agent proposes an operation, a trusted participant fulfils it, and an
// auditor reads what happened, waiting for the projection to have folded
// the last append (read-your-writes).
func Example() {
	ctx := context.Background()
	c, err := client.New(ledgerURL, client.WithDefaultSpace("example"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"p-1","from":"agent","to":["fs"],"kind":"mcp/proposal",
		"payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`)); err != nil {
		log.Fatal(err)
	}
	ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"f-1","from":"human","to":["fs"],"kind":"mcp/request","correlation_id":["p-1"],
		"payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt"}}}}`))
	if err != nil {
		log.Fatal(err)
	}
	p, err := c.Get(ctx, "p-1", client.WithMinSeq(ack.Seq))
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
	c, err := client.New(ledgerURL, client.WithDefaultSpace("bulk"))
	if err != nil {
		log.Fatal(err)
	}
	proposal := []byte(`{"protocol":"mew/v0.4","id":"b-1","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call"}}`)
	results, err := c.AppendMany(ctx, [][]byte{
		proposal,
		[]byte(`{"protocol":"mew/v0.4","from":"agent","kind":"mcp/proposal","payload":{}}`),
		proposal,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		if r.Error != nil {
			fmt.Printf("line %d: refused %s (field %s)\n", r.Line, r.Error.Code, r.Error.Field)
			continue
		}
		fmt.Printf("line %d: stored %s, duplicate %v\n", r.Line, r.ID, r.Duplicate)
	}
	// Output:
	// line 1: stored b-1, duplicate false
	// line 2: refused missing_field (field id)
	// line 3: stored b-1, duplicate true
}

// A refusal carries the ledger's code and the field at fault.
func ExampleError() {
	c, err := client.New(ledgerURL)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Append(context.Background(), []byte(`{"protocol":"mew/v0.4","id":"x","from":"agent","kind":"mcp/withdraw"}`))
	var refusal *api.Error
	if errors.As(err, &refusal) {
		fmt.Println(refusal.Status, refusal.Code, refusal.Field, errors.Is(err, api.ErrRefused))
	}
	_, err = c.Get(context.Background(), "no-such-proposal")
	fmt.Println(errors.Is(err, api.ErrNotFound))
	// Output:
	// 400 missing_correlation correlation_id true
	// true
}

// List walks every page of a query as one loop.
func ExampleClient_List() {
	ctx := context.Background()
	c, err := client.New(ledgerURL, client.WithDefaultSpace("listing"))
	if err != nil {
		log.Fatal(err)
	}
	var last uint64
	for _, id := range []string{"l-1", "l-2", "l-3"} {
		ack, err := c.Append(ctx, []byte(`{"protocol":"mew/v0.4","id":"`+id+`","from":"agent","kind":"mcp/proposal","payload":{"method":"tools/call"}}`))
		if err != nil {
			log.Fatal(err)
		}
		last = ack.Seq
	}
	for p, err := range c.List(ctx, client.ListFilter{State: "pending", Limit: 2}, client.WithMinSeq(last)) {
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
	c, err := client.New(ledgerURL)
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
