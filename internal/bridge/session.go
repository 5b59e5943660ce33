package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// Sessions (contract §14): every append of a bridge carries a
// ledger.BridgeMark (header Ledger-Bridge: the bridge, its MEW space, the
// session — one run of the bridge — and when it received the envelope),
// kept on the stored message. The fold derives from the log, per bridge,
// its last stored envelope and whether a gap covers everything since
// (api.BridgeSession, GET /v1/bridges). When a bridge starts it reads
// that record first: a record still "recording" in another session means
// that session ended without recording its hole (the bridge, the ledger
// or the machine died), and the bridge records the gap from that
// session's last stored envelope to its own first join before anything
// new is appended.

// ErrNoSessions: the sink cannot read the ledger's bridge sessions (a
// NATS sink without an HTTP API to read them from). The bridge then
// cannot learn how its last session ended, and says so.
var ErrNoSessions = errors.New("bridge: this append path cannot read the ledger's bridge sessions (give the bridge the ledger's HTTP API)")

// SessionReader reads what the ledger knows of one bridge in a ledger
// space, once the projection has caught up with the log: nil when it
// knows nothing.
type SessionReader interface {
	Session(ctx context.Context, space, bridge, mewSpace string) (*api.BridgeSession, error)
}

// markKey carries a batch's mark to the HTTP transport.
type markKey struct{}

// markTransport sets the Ledger-Bridge header of a request from its
// context (HTTPSink's batches).
type markTransport struct{ base http.RoundTripper }

func (t markTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if m, ok := r.Context().Value(markKey{}).(string); ok && m != "" {
		r = r.Clone(r.Context())
		r.Header.Set(ledger.HeaderBridge, m)
	}
	return t.base.RoundTrip(r)
}

// NewHTTPSink returns an HTTPSink on the ledger's API at api (token: a
// writer token when the API has tokens) whose appends carry the bridge's
// session mark.
func NewHTTPSink(api, token string) (HTTPSink, error) {
	hc := &http.Client{Timeout: time.Minute, Transport: markTransport{base: http.DefaultTransport}}
	cl, err := client.New(api, client.WithToken(token), client.WithHTTPClient(hc))
	if err != nil {
		return HTTPSink{}, err
	}
	return HTTPSink{Client: cl}, nil
}

// Session implements SessionReader: GET /v1/bridges?min_seq=latest (the
// stream's last sequence when the ledger answers). It needs the recorder
// (or auditor, or writer) role, nothing more.
func (s HTTPSink) Session(ctx context.Context, space, bridge, mewSpace string) (*api.BridgeSession, error) {
	q := url.Values{"space": {space}, "bridge": {bridge}, "mew_space": {mewSpace}, "min_seq": {"latest"}}
	var out struct {
		Bridges []api.BridgeSession `json:"bridges"`
	}
	if err := s.Client.Do(ctx, http.MethodGet, "/v1/bridges", q, nil, "", false, &out); err != nil {
		return nil, err
	}
	for i := range out.Bridges {
		if out.Bridges[i].Bridge == bridge && out.Bridges[i].MEWSpace == mewSpace {
			return &out.Bridges[i], nil
		}
	}
	return nil, nil
}

// Session implements SessionReader through the sink's Sessions reader
// (ErrNoSessions without one).
func (s AppenderSink) Session(ctx context.Context, space, bridge, mewSpace string) (*api.BridgeSession, error) {
	if s.Sessions == nil {
		return nil, ErrNoSessions
	}
	return s.Sessions.Session(ctx, space, bridge, mewSpace)
}

// Session implements SessionReader through the sink's Sessions reader
// (ErrNoSessions without one).
func (s *NATSSink) Session(ctx context.Context, space, bridge, mewSpace string) (*api.BridgeSession, error) {
	if s.Sessions == nil {
		return nil, ErrNoSessions
	}
	return s.Sessions.Session(ctx, space, bridge, mewSpace)
}

// StoreSessions reads bridge sessions from a ledger's own projection
// (the bridges inside `ledger serve`), once it has applied the stream's
// last sequence (StreamSeq). It is safe for concurrent use.
type StoreSessions struct {
	StreamSeq func(ctx context.Context) (uint64, error)
	Store     func() *projections.Store
}

// StreamLastSeq returns a StoreSessions.StreamSeq that reads the LEDGER
// stream's last sequence through js.
func StreamLastSeq(js jetstream.JetStream) func(ctx context.Context) (uint64, error) {
	return func(ctx context.Context) (uint64, error) {
		st, err := js.Stream(ctx, subjects.StreamName)
		if err != nil {
			return 0, fmt.Errorf("bridge: stream %s: %w", subjects.StreamName, err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("bridge: stream %s: %w", subjects.StreamName, err)
		}
		return info.State.LastSeq, nil
	}
}

// Session implements SessionReader.
func (s StoreSessions) Session(ctx context.Context, space, bridge, mewSpace string) (*api.BridgeSession, error) {
	seq, err := s.StreamSeq(ctx)
	if err != nil {
		return nil, err
	}
	st := s.Store()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := st.WaitApplied(wctx, seq); err != nil {
		return nil, fmt.Errorf("bridge: the projection has not applied seq %d: %w", seq, err)
	}
	all, err := st.BridgeSessions(space)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Bridge == bridge && all[i].MEWSpace == mewSpace {
			return &all[i], nil
		}
	}
	return nil, nil
}

// learn reads how the bridge's last session ended, retrying while the
// ledger does not answer, before anything is appended. It seeds the start
// of the next gap's window with the last envelope stored from the bridge
// and, when that session did not end cleanly, returns the gap to record
// at the first join (its ReconnectedAt is set then). It returns false when
// ctx ended first.
func (b *Bridge) learn(ctx context.Context) (*ledger.Gap, bool) {
	for attempt := 0; ; attempt++ {
		rec, err := b.opts.Sink.Session(ctx, b.opts.Space, b.opts.Participant, b.opts.MEWSpace)
		if errors.Is(err, ErrNoSessions) {
			b.log.Warn().Err(err).Msg("cannot learn how the bridge's last session ended: a crash of it would leave its hole unrecorded")
			return nil, true
		}
		if err == nil {
			return b.seed(rec), true
		}
		wait := b.backoff(attempt)
		b.setState(StateConnecting, "waiting for the ledger: "+err.Error())
		b.log.Warn().Err(err).Dur(KeyWait, wait).Msg("cannot read the bridge's last session from the ledger yet; retrying")
		if !sleep(ctx, wait) {
			return nil, false
		}
	}
}

// seed takes the ledger's record of the bridge (nil: none).
func (b *Bridge) seed(rec *api.BridgeSession) *ledger.Gap {
	if rec == nil {
		b.log.Info().Str(KeySession, b.sessionID).Msg("first session of this bridge in this space")
		return nil
	}
	st := storedMark{id: rec.LastEnvelope, seq: rec.LastSeq}
	switch {
	case rec.LastReceivedAt != nil:
		st.at = *rec.LastReceivedAt
	case rec.LastStoredAt != nil:
		st.at = *rec.LastStoredAt
	}
	if rec.LastSeq > 0 {
		b.mu.Lock()
		b.stored = st
		b.mu.Unlock()
	}
	if rec.State != api.BridgeRecording || rec.Session == b.sessionID {
		b.log.Info().Str(KeySession, b.sessionID).Str("last_session", rec.Session).Str(KeyID, rec.LastEnvelope).
			Msg("the bridge's last session ended with its hole on the record")
		return nil
	}
	now := b.opts.Now()
	g := &ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: b.opts.Gateway, NoticedAt: now,
		Session: rec.Session, Reason: fmt.Sprintf("session %s ended without recording its end (the bridge, the ledger or the machine died)", rec.Session)}
	if b.opts.HistoryFile != "" {
		g.Gateway, g.ReconnectedAt = b.opts.HistoryFile, now
	}
	b.log.Error().Str(KeySession, b.sessionID).Str("last_session", rec.Session).Str(KeyID, rec.LastEnvelope).Uint64("last_seq", rec.LastSeq).
		Msg("the bridge's last session did not end cleanly: what the space carried after its last stored envelope may be missing (recorded as a gap)")
	return g
}
