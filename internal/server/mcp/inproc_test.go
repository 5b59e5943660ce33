package mcp_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/mcp"
)

// TestHandlerTransport: a streaming answer is read while the handler
// still writes; closing the body stops the handler and waits for it; the
// context's Authorization is forwarded unless the request has its own; a
// handler that writes nothing answers 200; a panic is an error reading
// the body.
func TestHandlerTransport(t *testing.T) {
	var returned atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		defer returned.Store(true)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now()); err != http.ErrNotSupported {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		<-r.Context().Done() // like a watch stream waiting for a commit
	})
	mux.HandleFunc("GET /auth", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Authorization")+"|"+r.RemoteAddr)
	})
	mux.HandleFunc("GET /nothing", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		panic("boom")
	})
	hc := &http.Client{Transport: &mcp.HandlerTransport{Handler: func() http.Handler { return mux }}}
	get := func(ctx context.Context, path, auth string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://ledger.test"+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}

	resp := get(context.Background(), "/stream", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %v", resp.StatusCode, resp.Header)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("stream: %q %v", line, err)
	}
	if returned.Load() {
		t.Fatal("the handler returned before the body was closed")
	}
	resp.Body.Close()
	if !returned.Load() {
		t.Fatal("Close returned before the handler")
	}

	ctx := mcp.WithAuthorization(context.Background(), "Bearer from-ctx")
	for _, c := range []struct{ own, want string }{{"", "Bearer from-ctx|in-process"}, {"Bearer own", "Bearer own|in-process"}} {
		resp := get(ctx, "/auth", c.own)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != c.want {
			t.Errorf("auth (own %q): %q, want %q", c.own, body, c.want)
		}
	}

	resp = get(context.Background(), "/nothing", "")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 || err != nil {
		t.Errorf("nothing: %d %q %v", resp.StatusCode, body, err)
	}

	resp = get(context.Background(), "/panic", "")
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("panic: %d %v", resp.StatusCode, err)
	}

	// A request cancelled before the handler answers: RoundTrip returns
	// the context's error once the handler has returned.
	cctx, cancel := context.WithCancel(context.Background())
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, "http://ledger.test/slow", nil)
	if _, err := hc.Do(req); err == nil {
		t.Error("a cancelled request succeeded")
	}
}
