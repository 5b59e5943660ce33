package appendlog

import (
	"time"

	"github.com/mewledger/ledger/ledger"
)

// PrepareSystem is Prepare for an envelope the ledger writes itself
// (ledger/gap, ledger/expire): AppendSystem's checks, without Submittable
// (it must still decode to a lifecycle type and pass the limits). Hand
// the result to Submit. The error is a *RefusalError.
func (a *Appender) PrepareSystem(space string, raw []byte) (*ledger.Prepared, error) {
	p, _, err := a.prepare(space, raw, false)
	return p, err
}

// Now returns the Appender's clock: the time of an append, which is the
// "current time" of kernel rule V-PROP-010 at submit time.
func (a *Appender) Now() time.Time { return a.opts.Now() }

// Limits returns the Appender's submit limits, defaults filled in.
func (a *Appender) Limits() ledger.SubmitLimits { return a.opts.Limits.WithDefaults() }
