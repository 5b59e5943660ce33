package submit

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// GapEndpoint is the micro endpoint on which bridges report recording gaps
// (contract §14): a request on ledger.gap.<space> whose body is a ledger.Gap
// object; the ledger writes the ledger/gap event itself (sender "ledger")
// and replies like the submit endpoint. Mounted when the Appender can
// append the ledger's own envelopes (a *appendlog.Appender can).
const GapEndpoint = "gap"

// SystemAppender checks and hands to the group commit the envelopes the
// ledger writes itself. *appendlog.Appender implements it.
type SystemAppender interface {
	PrepareSystem(space string, raw []byte) (*ledger.Prepared, error)
	Submit(ctx context.Context, p *ledger.Prepared) (*appendlog.Pending, error)
}

// Log keys of gap reports.
const (
	keyBridge = "bridge"
	keyGapID  = "gap_id"
)

// addGapEndpoint mounts the gap endpoint when the Appender has
// AppendSystem.
func (s *Service) addGapEndpoint(svc micro.Service) error {
	if _, ok := s.opts.Appender.(SystemAppender); !ok {
		return nil
	}
	err := svc.AddEndpoint(GapEndpoint, micro.HandlerFunc(s.handleGap),
		micro.WithEndpointSubject(subjects.GapWildcard),
		micro.WithEndpointMetadata(map[string]string{
			"description": "request body: a bridge's gap {\"bridge\",\"disconnected_at\",...}; the ledger appends the ledger/gap event; reply: {\"id\",\"seq\",\"duplicate\"} or {\"error\"}",
			"format":      "application/json",
		}))
	if err != nil {
		return fmt.Errorf("submit: add endpoint %s: %w", subjects.GapWildcard, err)
	}
	return nil
}

// handleGap runs on the gap endpoint's subscription goroutine.
func (s *Service) handleGap(req micro.Request) { s.dispatch(req, s.acceptGap) }

// acceptGap is the gap endpoint's first stage (see dispatch): a bad
// subject or gap, or a gap envelope the Appender refuses, is answered at
// once; the append is awaited by the second stage.
func (s *Service) acceptGap(req micro.Request) func() {
	if s.storageFull(req) {
		return nil
	}
	space, err := subjects.ParseGap(req.Subject())
	if err != nil {
		s.refuse(req, badSpace(err))
		return nil
	}
	g, err := ledger.ParseGap(req.Data())
	if err != nil {
		s.refuse(req, ledger.WireError(err))
		return nil
	}
	if e := s.checkGap(g); e != nil {
		s.refuse(req, e)
		return nil
	}
	raw, _ := ledger.GapEnvelope(g) // ParseGap checked it builds
	sys := s.opts.Appender.(SystemAppender)
	p, err := sys.PrepareSystem(space, raw)
	if err != nil {
		s.outcome(req, ledger.Result{Err: err}, s.answer)
		return nil
	}
	pd, err := sys.Submit(s.ctx, p)
	if err != nil {
		err = fmt.Errorf("%w: gap %q to %s: %w", ledger.ErrPublish, p.Decoded.Env.ID, p.Subject, err)
		s.outcome(req, ledger.Result{Err: err}, s.answer)
		return nil
	}
	return func() {
		res, err := pd.Result(s.ctx)
		if err == nil {
			s.log.Info().Str(keyBridge, g.Bridge).Str(keyGapID, res.ID).Uint64(logging.KeySeq, res.Seq).Msg("gap recorded")
		}
		s.outcome(req, res, s.reply)
	}
}
