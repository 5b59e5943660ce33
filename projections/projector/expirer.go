package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
)

// SystemAppender appends envelopes the ledger writes itself.
// *appendlog.Appender implements it.
type SystemAppender interface {
	AppendSystem(ctx context.Context, space string, raw []byte) (ledger.Result, error)
}

// Defaults of ExpirerOptions.
const (
	DefaultExpiryInterval = time.Second
	DefaultExpiryGrace    = time.Second
	DefaultExpiryRetry    = 30 * time.Second
)

// ExpirerOptions configures an Expirer.
type ExpirerOptions struct {
	// Interval between scans of the deadline index. Default 1s.
	Interval time.Duration
	// Grace is added to a deadline before the expiry is appended, so that a
	// NATS server whose clock is slightly behind ours still stores it after
	// the deadline (the fold refuses an expiry stored before it). Default 1s.
	Grace time.Duration
	// Retry is how long to wait before appending the same expiry again
	// while the projection has not folded it yet. Default 30s.
	Retry time.Duration
	// Now is the clock; default time.Now. (The expirer decides when to
	// write; the fold decides, from stream time alone, what it means.)
	Now func() time.Time
	// Batch is the page size of a scan's reads of the deadline index (a
	// scan pages through all of it). Default 1000.
	Batch  int
	Logger zerolog.Logger
}

// Validate checks the options and fills defaults.
func (o *ExpirerOptions) Validate() error {
	if o.Interval == 0 {
		o.Interval = DefaultExpiryInterval
	}
	if o.Grace == 0 {
		o.Grace = DefaultExpiryGrace
	}
	if o.Retry == 0 {
		o.Retry = DefaultExpiryRetry
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Batch == 0 {
		o.Batch = 1000
	}
	if o.Interval < 0 || o.Grace < 0 || o.Retry < 0 || o.Batch < 0 {
		return errors.New("projector: expirer options must not be negative")
	}
	return nil
}

// Expirer appends a ledger/expire event (contract §5.6) for every proposal still
// pending in the projection when its deadline has passed. The event's id is
// deterministic (ledger.ExpireID), so several ledger processes write it once:
// JetStream drops a repeat within its duplicate window and the fold records
// any later one as a duplicate.
type Expirer struct {
	store *projections.Store
	app   SystemAppender
	opts  ExpirerOptions
	tried map[string]time.Time // (space, id) -> last append, bounded by the pending set
}

// NewExpirer returns an expirer reading store's deadline index and appending
// through app. The caller owns both.
func NewExpirer(store *projections.Store, app SystemAppender, opts ExpirerOptions) (*Expirer, error) {
	if store == nil || app == nil {
		return nil, errors.New("projector: NewExpirer needs a Store and an appender")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Expirer{store: store, app: app, opts: opts, tried: map[string]time.Time{}}, nil
}

// Run scans every Interval until ctx is cancelled, then returns nil. Append
// errors are logged and retried on a later scan; a store error is returned.
func (e *Expirer) Run(ctx context.Context) error {
	t := time.NewTicker(e.opts.Interval)
	defer t.Stop()
	for {
		if _, err := e.Scan(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, projections.ErrClosed) {
				return err
			}
			e.opts.Logger.Warn().Err(err).Msg("expirer scan")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Scan appends the expiries that are due now and returns how many it
// appended. It pages through every due deadline of every space, Batch at a
// time: proposals whose expiry was appended less than Retry ago (not folded
// yet, or refused by the fold) are skipped, never a reason to stop, so no
// number of them starves the others.
func (e *Expirer) Scan(ctx context.Context) (int, error) {
	now := e.opts.Now()
	live := map[string]bool{}
	n := 0
	var firstErr error
	var after *projections.Due
	for {
		due, err := e.store.DueExpiriesAfter(now.Add(-e.opts.Grace), after, e.opts.Batch)
		if err != nil {
			return n, err
		}
		for _, d := range due {
			k := d.Space + "\x00" + d.ID
			live[k] = true
			if last, ok := e.tried[k]; ok && now.Sub(last) < e.opts.Retry {
				continue
			}
			if _, err := e.app.AppendSystem(ctx, d.Space, ledger.ExpireEnvelope(d.Space, d.ID, d.Deadline)); err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("projector: expire %s/%s: %w", d.Space, d.ID, err)
				}
				if ctx.Err() != nil {
					return n, firstErr
				}
				continue
			}
			e.tried[k] = now
			n++
			e.opts.Logger.Debug().Str(logKeySpace, d.Space).Str(logKeyID, d.ID).Msg("expiry appended")
		}
		if len(due) < e.opts.Batch {
			break
		}
		after = &due[len(due)-1]
	}
	// Forget proposals that are no longer due (folded as expired): every
	// due one was seen.
	for k := range e.tried {
		if !live[k] {
			delete(e.tried, k)
		}
	}
	return n, firstErr
}
