package client_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/mewledger/ledger/client"
)

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := client.New(client.Options{API: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("status of nothing: %v, want ErrUnreachable", err)
	}
	var e *client.Error
	if errors.As(err, &e) {
		t.Fatalf("unreachable reported as a ledger answer: %v", e)
	}
}

func TestOptions(t *testing.T) {
	if _, err := client.New(client.Options{API: "ftp://x"}); !errors.Is(err, client.ErrOptions) {
		t.Fatalf("ftp API: %v", err)
	}
	c, err := client.New(client.Options{API: ledgerURL + "/"})
	if err != nil || strings.HasSuffix(c.API(), "/") {
		t.Fatalf("trailing slash: %v %q", err, c.API())
	}
	if c, _ := client.New(client.Options{}); c.API() != client.DefaultAPI {
		t.Fatalf("default API %q", c.API())
	}
}

// TestAppendStreamOrder streams 500 lines with blank ones among them and
// checks every envelope is answered once, in order.
func TestAppendStreamOrder(t *testing.T) {
	c, err := client.New(client.Options{API: ledgerURL, Space: "stream-order"})
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
	err = c.AppendStream(context.Background(), strings.NewReader(b.String()), nil, func(r client.Result) error {
		if r.Err != nil {
			return r.Err
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
