package httpauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestWriteLimitCountsEnvelopes: a request carrying many envelopes pays
// one write each (contract §10): after a request that took its burst through
// WaitWrites, the client's next request is refused; a limit that is off
// takes nothing.
func TestWriteLimitCountsEnvelopes(t *testing.T) {
	l, err := NewLimiter(RateConfig{PerSecond: 0.001, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	var waitErr error
	h := l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		defer cancel()
		waitErr = WaitWrites(ctx, 4) // 5 envelopes: the request paid for one
		w.WriteHeader(http.StatusAccepted)
	}))
	post := func() int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/events", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if c := post(); c != http.StatusAccepted || waitErr != nil {
		t.Fatalf("first request: %d, %v", c, waitErr)
	}
	if c := post(); c != http.StatusTooManyRequests {
		t.Fatalf("second request: %d, want 429 (the budget went to the first one's envelopes)", c)
	}
	if ok, _ := l.AllowN("ip:192.0.2.2", 6); ok {
		t.Fatal("AllowN over the burst allowed")
	}

	off, err := NewLimiter(RateConfig{PerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	h = off.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := WaitWrites(r.Context(), 1_000_000); err != nil {
			t.Errorf("WaitWrites with the limit off: %v", err)
		}
		n++
	}))
	for range 100 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/events", nil))
	}
	if n != 100 {
		t.Fatalf("%d of 100 requests served with the limit off", n)
	}
}
