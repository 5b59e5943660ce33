package appendlog

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/mewledger/ledger/ledger"
)

// maxClashes bounds how many derived Nats-Msg-Ids one append tries when
// each is found taken by other bytes.
const maxClashes = 4

// verify checks a duplicate answer (contract §4): JetStream trusts the
// Nats-Msg-Id alone, so the message stored at r.Seq must carry p's
// subject and digest for the answer to stand. When it does not (other
// bytes were stored under that id), p is stored anyway under a derived
// Nats-Msg-Id (<msg id>/clash/<clashing seq>, deterministic so a retry
// is still stored once) with HeaderMsgIDClash naming the clashing id,
// and answered as stored. Anything else is returned unchanged.
func (a *Appender) verify(ctx context.Context, p *ledger.Prepared, r ledger.Result) ledger.Result {
	attempts := r.Attempts
	for i := 0; r.Err == nil && r.Duplicate; i++ {
		same, err := a.storedSameRetry(ctx, p, r.Seq)
		if err != nil {
			r.Err = fmt.Errorf("%w: envelope %q: checking the copy stored at %d: %w", ledger.ErrPublish, p.Decoded.Env.ID, r.Seq, err)
			return r
		}
		if same {
			return r
		}
		if i == maxClashes {
			r.Err = fmt.Errorf("%w: envelope %q: %d Nats-Msg-Ids tried are taken by other bytes", ledger.ErrPublish, p.Decoded.Env.ID, maxClashes+1)
			return r
		}
		msgID := p.MsgID + "/clash/" + strconv.FormatUint(r.Seq, 10)
		r = a.publishRetry(ctx, p, msgID, p.MsgID)
		attempts += r.Attempts
		r.Attempts = attempts
	}
	return r
}

// storedSameRetry is storedSame, tried again with the appends' backoff
// when it failed for a passing reason (a leader election on a cluster).
func (a *Appender) storedSameRetry(ctx context.Context, p *ledger.Prepared, seq uint64) (bool, error) {
	same, err := a.storedSame(ctx, p, seq)
	for n := 1; err != nil && IsTransient(err) && n <= a.opts.MaxRetries && ctx.Err() == nil; n++ {
		t := time.NewTimer(backoff(a.opts.RetryWait, n))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		same, err = a.storedSame(ctx, p, seq)
	}
	return same, err
}

// storedSame reports whether the message at seq has p's subject and is
// an envelope with p's id and digest.
func (a *Appender) storedSame(ctx context.Context, p *ledger.Prepared, seq uint64) (bool, error) {
	st, err := a.streamHandle(ctx)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.AckTimeout)
	defer cancel()
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return false, err
	}
	return a.holds(m, p), nil
}
