package app

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/server/api"
)

// TestAsOfFoldShares (issue 36 item 5): a caller has one as-of fold in
// hand at most (a second is 429 as_of_busy at once, not queued behind
// the first), the server asOfQueue (503 as_of_busy past them), and a
// share is given back when its fold is answered.
func TestAsOfFoldShares(t *testing.T) {
	c := newAsOfCache(nil, t.TempDir(), nil, zerolog.Nop())
	done, err := c.take("token:auditor")
	if err != nil {
		t.Fatal(err)
	}
	var busy *api.AsOfBusyError
	if _, err := c.take("token:auditor"); !errors.As(err, &busy) || busy.Status != http.StatusTooManyRequests {
		t.Fatalf("a second fold of one caller: %v, want 429 as_of_busy", err)
	}
	var dones []func()
	for i := 1; i < asOfQueue; i++ {
		d, err := c.take(fmt.Sprintf("token:t%d", i))
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		dones = append(dones, d)
	}
	if _, err := c.take("token:late"); !errors.As(err, &busy) || busy.Status != http.StatusServiceUnavailable {
		t.Fatalf("a fold past the server's share: %v, want 503 as_of_busy", err)
	}
	done()
	done() // safe twice
	if d, err := c.take("token:auditor"); err != nil {
		t.Fatalf("after its fold was answered: %v", err)
	} else {
		d()
	}
	for _, d := range dones {
		d()
	}
	if c.nPending != 0 || len(c.pending) != 0 {
		t.Fatalf("shares not given back: %d %v", c.nPending, c.pending)
	}
}

// TestAsOfRoomRefused: a fold the temporary volume has no room for (and
// no kept fold to evict) is refused at once, 503 as_of_busy.
func TestAsOfRoomRefused(t *testing.T) {
	c := newAsOfCache(nil, t.TempDir(), nil, zerolog.Nop())
	c.room = func() (uint64, uint64, error) { return 10 << 20, 50 << 20, nil }
	var busy *api.AsOfBusyError
	if err := c.checkRoom(); !errors.As(err, &busy) || busy.Status != http.StatusServiceUnavailable {
		t.Fatalf("no room for a fold: %v, want 503 as_of_busy", err)
	}
	c.room = func() (uint64, uint64, error) { return 60 << 20, 50 << 20, nil }
	if err := c.checkRoom(); err != nil {
		t.Fatalf("room for a fold: %v", err)
	}
}
