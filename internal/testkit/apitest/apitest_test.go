package apitest_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/submit"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

const (
	proposal = `{"protocol":"mew/v0.4","id":"p 1/ü","from":"alice","to":["fs"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{}}}`
	reject   = `{"protocol":"mew/v0.4","id":"r-1","from":"fs","kind":"mcp/reject","correlation_id":["p 1/ü"],"payload":{"reason":"unsafe"}}`
)

func TestClient(t *testing.T) {
	a := apptest.Start(t)
	ctx := context.Background()
	c, err := apitest.New(client.Options{API: a.HTTPURL() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Publish(ctx, "", []byte(proposal))
	if err != nil || r.Seq == 0 {
		t.Fatalf("publish: %+v %v", r, err)
	}
	res, err := c.PublishLines(ctx, "", [][]byte{[]byte(reject), []byte(`{}`)})
	if err != nil || len(res) != 2 || res[0].Error != nil || res[1].Error == nil || res[1].Line != 2 {
		t.Fatalf("publish lines: %+v %v", res, err)
	}
	ro := apitest.ReadOptions{MinSeq: res[0].Seq}
	// An id with a space, a slash and unicode survives the URL path.
	p, raw, err := c.Get(ctx, "p 1/ü", ro)
	if err != nil || p.State != api.StateRejected || len(raw) == 0 {
		t.Fatalf("get: %+v %v", p, err)
	}
	h, _, err := c.History(ctx, "p 1/ü", ro)
	if err != nil || len(h.Events) != 2 {
		t.Fatalf("history: %+v %v", h, err)
	}
	l, _, err := c.List(ctx, apitest.ListFilter{State: "rejected", Proposer: "alice", Limit: 10}, ro)
	if err != nil || len(l.Proposals) != 1 {
		t.Fatalf("list: %+v %v", l, err)
	}
	st, _, err := c.Stats(ctx, ro)
	if err != nil || st.ByState["rejected"] != 1 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	status, err := c.Status(ctx)
	if err != nil || status.StreamSeq != res[0].Seq {
		t.Fatalf("status: %+v %v", status, err)
	}

	// The API's no is an *APIError with the wire error.
	_, _, err = c.Get(ctx, "nope", apitest.ReadOptions{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != "not_found" || ae.Field != "id" {
		t.Fatalf("get missing: %v", err)
	}
	_, err = c.Publish(ctx, "", []byte(`{"protocol":"mew/v0.4"}`))
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != "missing_field" {
		t.Fatalf("publish refused: %v", err)
	}
	_, _, err = c.List(ctx, apitest.ListFilter{State: "nope"}, apitest.ReadOptions{})
	if !errors.As(err, &ae) || ae.Field != "state" {
		t.Fatalf("list bad state: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := apitest.New(client.Options{API: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background()); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("status of nothing: %v, want ErrUnreachable", err)
	}
	if _, err := submit.DialSubmitter(context.Background(), "nats://"+addr); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("dial nothing: %v, want ErrUnreachable", err)
	}
	if _, err := apitest.New(client.Options{API: "127.0.0.1:8080"}); !errors.Is(err, client.ErrOptions) {
		t.Fatalf("API without scheme: %v, want ErrOptions", err)
	}
}
