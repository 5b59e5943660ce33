package submit

import (
	"context"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// A recorder's marks and gap reports on the submit service (contract
// §14): NATS permissions decide who may publish submit requests and gap
// reports of a space (gateways and bridges, never agents); the service
// refuses a mark or a gap dated ahead of the ledger's clock by more than
// ledger.MaxClockAhead (clock_ahead) and a gap report whose last_seq is
// past the log's end (gap_ahead). Refusals are counted by code.

// checkMark checks a Ledger-Bridge header ("" passes): it parses, and is
// not dated ahead.
func checkMark(mark string) *api.Error {
	if mark == "" {
		return nil
	}
	m, err := ledger.ParseBridgeMark(mark)
	if err == nil {
		err = ledger.CheckMarkClock(m, time.Now())
	}
	if err != nil {
		return ledger.WireError(err)
	}
	return nil
}

// checkGap checks a parsed gap report against the ledger's clock and the
// log's last sequence.
func (s *Service) checkGap(g ledger.Gap) *api.Error {
	last := ^uint64(0)
	if s.opts.StreamSeq != nil {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer cancel()
		n, err := s.opts.StreamSeq(ctx)
		if err != nil {
			return &api.Error{Code: api.CodeUnavailable, Message: "reading the log's last sequence: " + err.Error()}
		}
		last = n
	}
	if err := ledger.CheckGapReport(g, time.Now(), last); err != nil {
		return ledger.WireError(err)
	}
	return nil
}
