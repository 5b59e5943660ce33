package api

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
)

// swapReader is the API's Reader: the live projection behind a RWMutex,
// so that an online rebuild can put a new store in its place while the
// API serves. Each read holds the read lock for the one call; Swap takes
// the write lock, so it waits for the reads in hand, and the reads that
// arrive during the swap wait for it (a few milliseconds: close two
// Pebble stores, rename, open one) instead of failing on a closed store.
//
// WaitApplied does not hold the lock while it waits (a min_seq wait may
// last seconds): it waits on the current reader, and when that reader is
// swapped out under it, it waits on the new one.
type swapReader struct {
	mu  sync.RWMutex
	r   Reader
	gen uint64        // incremented by each swap
	ch  chan struct{} // closed by the next swap
}

func newSwapReader(r Reader) *swapReader { return &swapReader{r: r, ch: make(chan struct{})} }

func (s *swapReader) Get(space, id string) (*api.Proposal, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r.Get(space, id)
}

func (s *swapReader) History(space, key string) ([]api.HistoryEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r.History(space, key)
}

func (s *swapReader) List(q projections.ListQuery) (projections.ListPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r.List(q)
}

// GetRaw is Get's stored record, when the reader in place has it
// (served.go); errNoRaw otherwise.
func (s *swapReader) GetRaw(space, id string) (json.RawMessage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if rr, ok := s.r.(rawReader); ok {
		return rr.GetRaw(space, id)
	}
	return nil, errNoRaw
}

// ListRaw is List's stored records, when the reader in place has them
// (served.go); errNoRaw otherwise.
func (s *swapReader) ListRaw(q projections.ListQuery) (projections.RawPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if rr, ok := s.r.(rawReader); ok {
		return rr.ListRaw(q)
	}
	return projections.RawPage{}, errNoRaw
}

func (s *swapReader) Stats(space string) (*api.Stats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r.Stats(space)
}

func (s *swapReader) AppliedSeq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r.AppliedSeq()
}

func (s *swapReader) current() (Reader, uint64, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.r, s.gen, s.ch
}

func (s *swapReader) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		r, gen, swapped := s.current()
		wctx, cancel := context.WithCancel(ctx)
		stop := make(chan struct{})
		go func() {
			select {
			case <-swapped:
				cancel()
			case <-stop:
			}
		}()
		err := r.WaitApplied(wctx, seq)
		close(stop)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		// Swapped out (the wait was cancelled, or the old store closed
		// under it): wait on the new reader. The read lock waits for a
		// swap under way to finish.
		if _, now, _ := s.current(); now == gen {
			return err
		}
	}
}

// swap replaces the reader by what f returns, under the write lock: f
// gets the current reader, and no read runs while f runs. When f fails
// the reader it returns (which may be the old one, or a reopened one)
// is put in place anyway unless it is nil, and f's error is returned.
func (s *swapReader) swap(f func(old Reader) (Reader, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := f(s.r)
	if r != nil && r != s.r {
		s.r = r
		s.gen++
		close(s.ch)
		s.ch = make(chan struct{})
	}
	return err
}

// SwapReader replaces the API's live Reader (an online rebuild's swap,
// package app). f runs under the reader's write lock: reads wait for it,
// and it may close the old reader. A non-nil reader f returns takes the
// old one's place even when f also returns an error.
func (a *API) SwapReader(f func(old Reader) (Reader, error)) error { return a.reader.swap(f) }

// Reader returns the API's live Reader (a view through the swap lock).
func (a *API) Reader() Reader { return a.reader }
