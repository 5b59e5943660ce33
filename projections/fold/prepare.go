package fold

import (
	"runtime"
	"sync"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// prepared is what Prepare worked out of an event ahead of Apply: its
// subject and its decoding, exactly as arrive would compute them.
type prepared struct {
	subj subjects.Event
	serr error
	d    *ledger.Decoded
	derr error
}

// decodeEvent parses ev's subject and decodes its envelope, as arrive does.
// It is pure.
func decodeEvent(ev *Event) *prepared {
	pr := &prepared{}
	pr.subj, pr.serr = subjects.ParseEvent(ev.Subject)
	if pr.serr != nil {
		return pr // arrive does not decode an event with a bad subject
	}
	pr.d, pr.derr = ledger.Decode(ev.Raw, ledger.DecodeOptions{Now: ev.Time.UTC()})
	return pr
}

// minParallelDecode is the batch size from which Prepare decodes on
// several goroutines.
const minParallelDecode = 64

// Prefetcher is an optional interface of a [State] that can read ahead
// the records the fold of a run of events will look up (the Pebble store's
// batch implements it). Prefetch is called by [Folder.Prepare] with events
// already decoded (see [Event.Decoded]), before any of them is applied. It
// must change nothing the fold computes: only where the State finds its
// records, never what they are. Its errors are the State's storage errors.
type Prefetcher interface {
	Prefetch(evs []Event) error
}

// Prepare readies evs, which are about to be applied to st in this order,
// for a fast fold. It decodes them (on up to GOMAXPROCS goroutines:
// decoding is pure, and Apply reuses the result kept in each Event); when
// st is a [Prefetcher], it then lets it read ahead the records their fold
// will look up first (the Pebble store's batch reads them in key order with
// one iterator: point reads in key order cost a third of random ones).
//
// Prepare changes nothing the fold computes: Apply of a prepared event
// returns and writes exactly what Apply of the unprepared one would (the
// data-driven fold tests run both ways). Prepare must be called before any
// of evs is applied to st; evs are modified in place. It returns the
// Prefetcher's errors.
func (f *Folder) Prepare(st State, evs []Event) error {
	DecodeAll(evs)
	if p, ok := st.(Prefetcher); ok {
		return p.Prefetch(evs)
	}
	return nil
}

// Decoded returns what Prepare or DecodeAll worked out of ev: its space
// and its decoded envelope; ok is false when ev was not decoded yet, or
// when its subject or envelope is bad (the fold then reads what it needs
// itself). d must not be modified.
func (ev *Event) Decoded() (space string, d *ledger.Decoded, ok bool) {
	pr := ev.pre
	if pr == nil || pr.serr != nil || pr.derr != nil {
		return "", nil, false
	}
	return pr.subj.Space, pr.d, true
}

// DecodeAll parses the subject and decodes the envelope of every event of
// evs not decoded yet, on up to GOMAXPROCS goroutines, keeping the result
// in each Event for Apply (which decodes an event itself otherwise). It is
// pure, and may run on another goroutine than the fold's (the rebuild
// decodes while the previous batch folds) as long as nothing else uses evs
// meanwhile.
func DecodeAll(evs []Event) {
	workers := runtime.GOMAXPROCS(0)
	if len(evs) < minParallelDecode || workers < 2 {
		for i := range evs {
			if evs[i].pre == nil {
				evs[i].pre = decodeEvent(&evs[i])
			}
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (len(evs) + workers - 1) / workers
	for lo := 0; lo < len(evs); lo += chunk {
		part := evs[lo:min(lo+chunk, len(evs))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range part {
				if part[i].pre == nil {
					part[i].pre = decodeEvent(&part[i])
				}
			}
		}()
	}
	wg.Wait()
}
