package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/projections"
)

// TestSwapReader: a min_seq wait in hand on the old store goes on on the
// new one when the reader is swapped (and the old store closed) under it,
// and reads after the swap answer from the new store.
func TestSwapReader(t *testing.T) {
	open := func() *projections.Store {
		s, err := projections.OpenStore(projections.StoreOptions{Dir: t.TempDir(), Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	oldStore, newStore := open(), open()
	if err := newStore.NewBatch().Commit(5); err != nil {
		t.Fatal(err)
	}
	old := &waitSignal{Store: oldStore, waiting: make(chan struct{})}
	a, err := api.New(api.Options{
		Reader:     old,
		StreamSeq:  func(context.Context) (uint64, error) { return 5, nil },
		MinSeqWait: 5 * time.Second,
		Logger:     natstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Handler())
	t.Cleanup(hs.Close)

	done := make(chan int, 1)
	go func() {
		resp, err := http.Get(hs.URL + "/v1/stats?min_seq=5")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select { // the read waits on the old store
	case <-old.waiting:
	case code := <-done:
		t.Fatalf("min_seq=5 answered %d before the swap", code)
	}
	select {
	case code := <-done:
		t.Fatalf("min_seq=5 answered %d before the swap", code)
	default:
	}
	swapErr := errors.New("reported")
	err = a.SwapReader(func(o api.Reader) (api.Reader, error) {
		if o != api.Reader(old) {
			t.Errorf("SwapReader got %v, want the old store", o)
		}
		_ = oldStore.Close()
		return newStore, swapErr
	})
	if !errors.Is(err, swapErr) {
		t.Fatalf("SwapReader = %v", err)
	}
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("min_seq=5 after the swap: %d", code)
		}
	case <-testctx.Context(t).Done():
		t.Fatal("the min_seq wait did not move to the new store")
	}
	if got := a.Reader().AppliedSeq(); got != 5 {
		t.Fatalf("AppliedSeq after the swap = %d", got)
	}
}

// waitSignal is a store whose WaitApplied closes waiting when it is
// entered: the test knows a read is waiting on it without sleeping.
type waitSignal struct {
	*projections.Store
	once    sync.Once
	waiting chan struct{}
}

func (w *waitSignal) WaitApplied(ctx context.Context, seq uint64) error {
	w.once.Do(func() { close(w.waiting) })
	return w.Store.WaitApplied(ctx, seq)
}
