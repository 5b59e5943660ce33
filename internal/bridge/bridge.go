package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/ledger"
)

// Log keys of the bridge.
const (
	KeyBridge   = "bridge"
	KeyMEWSpace = "mew_space"
	KeyGateway  = "gateway"
	KeyKind     = "kind"
	KeyID       = "envelope_id"
	KeyReason   = "reason"
	KeyWait     = "retry_in"
	KeyHistory  = "history"
	KeySender   = "sender"
	KeyGapID    = "gap_id"
)

// KindOversize and KindBinary label frames the bridge cannot send.
const (
	KindOversize = "oversize"
	KindBinary   = "binary"
)

// ErrEvicted is the cause of a session ended because another participant
// joined the MEW space under the bridge's name.
var ErrEvicted = errors.New("bridge: evicted")

// Bridge records one MEW space into the ledger (SPEC §14). Create it with
// New and call Run once; Run owns every goroutine the bridge starts.
type Bridge struct {
	opts     Options
	log      zerolog.Logger
	filter   *Filter
	partsURL string

	mu      sync.Mutex
	state   string
	since   time.Time
	lastID  string
	gaps    int
	records int
	frames  int
}

// New validates o and returns a Bridge. It does no I/O.
func New(o Options) (*Bridge, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if _, ok := o.Sink.(HTTPSink); ok && o.HistoryFile != "" {
		return nil, fmt.Errorf("%w: %w", ErrOptions, ErrSenderUnsupported)
	}
	b := &Bridge{opts: o, filter: NewFilter(o.Now), state: StateStopped, since: o.Now()}
	b.log = o.Logger.With().Str(logging.KeyComponent, "bridge").Str(KeyBridge, o.Participant).
		Str(KeyMEWSpace, o.MEWSpace).Str(logging.KeySpace, o.Space).Logger()
	o.Metrics.register(o.Participant)
	if o.HistoryFile == "" {
		b.partsURL, _ = participantsURL(o.Gateway, o.MEWSpace) // checked by Validate
	}
	return b, nil
}

// Health is a bridge's state for /healthz.
type Health struct {
	Bridge       string    `json:"bridge"`
	MEWSpace     string    `json:"mew_space"`
	Space        string    `json:"space"`
	State        string    `json:"state"`
	Since        time.Time `json:"since"`
	LastEnvelope string    `json:"last_envelope,omitempty"`
	Frames       int       `json:"frames"`
	Appended     int       `json:"appended"`
	Gaps         int       `json:"gaps"`
}

// Health returns the bridge's current state.
func (b *Bridge) Health() Health {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Health{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Space: b.opts.Space, State: b.state,
		Since: b.since, LastEnvelope: b.lastID, Frames: b.frames, Appended: b.records, Gaps: b.gaps}
}

func (b *Bridge) setState(s string) {
	b.mu.Lock()
	if b.state != s {
		b.state, b.since = s, b.opts.Now()
	}
	b.mu.Unlock()
	b.opts.Metrics.setState(b.opts.Participant, s)
}

func (b *Bridge) last() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastID
}

// Run records until ctx is cancelled, then reports the open gap (bounded
// by StopTimeout) and returns nil. It reconnects with backoff whenever
// the connection ends, and reports each disconnection as a gap once
// joined again. With HistoryFile it follows the file instead.
func (b *Bridge) Run(ctx context.Context) error {
	if b.opts.HistoryFile != "" {
		b.log.Info().Str(KeyHistory, b.opts.HistoryFile).Msg("bridge starting: following the gateway's envelope history")
		err := b.follow(ctx)
		b.setState(StateStopped)
		b.log.Info().Str(KeyHistory, b.opts.HistoryFile).Msg("bridge stopped")
		return err
	}
	b.log.Info().Str(KeyGateway, b.opts.Gateway).Msg("bridge starting")
	var open []ledger.Gap // gaps not yet reported
	failures := 0
	for ctx.Err() == nil {
		b.setState(StateConnecting)
		conn, caps, err := b.join(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			wait := b.backoff(failures)
			failures++
			b.log.Warn().Err(err).Dur(KeyWait, wait).Msg("cannot join the MEW space; retrying")
			if !sleep(ctx, wait) {
				break
			}
			continue
		}
		failures = 0
		b.setState(StateJoined)
		joined := b.opts.Now()
		b.log.Info().Str(KeyGateway, b.opts.Gateway).Msg("joined the MEW space: recording")
		for i := range open {
			open[i].ReconnectedAt = joined
		}
		open = b.reportGaps(ctx, open)

		cause := b.session(ctx, conn, caps)
		_ = conn.CloseNow()
		g := ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: b.opts.Gateway,
			LastEnvelope: b.last(), DisconnectedAt: b.opts.Now(), Reason: cause.Error()}
		if ctx.Err() != nil {
			g.Reason = "bridge stopped"
			open = append(open, g)
			break
		}
		open = append(open, g)
		b.setState(StateDisconnected)
		if errors.Is(cause, ErrEvicted) {
			b.log.Error().Str(KeyReason, g.Reason).Str(KeyID, g.LastEnvelope).
				Msg("EVICTED from the MEW space: another participant joined under the bridge's name; everything the space carried since is missing from the ledger (recorded as a gap). Rejoining takes the name back; make the bridge's participant id unique")
		} else {
			b.log.Warn().Str(KeyReason, g.Reason).Str(KeyID, g.LastEnvelope).Msg("disconnected from the MEW gateway; reconnecting (the gap will be recorded)")
		}
		if !sleep(ctx, b.opts.BackoffMin) {
			break
		}
	}
	if len(open) > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.StopTimeout)
		open = b.reportGaps(sctx, open)
		cancel()
		for _, g := range open {
			b.log.Error().Str(KeyGapID, ledger.GapID(g)).Str(KeyReason, g.Reason).Msg("could not record a gap before stopping: the ledger does not show it")
		}
	}
	b.setState(StateStopped)
	b.log.Info().Msg("bridge stopped")
	return nil
}

// backoff is the wait before reconnection attempt n (0-based): BackoffMin
// doubled n times, at most BackoffMax.
func (b *Bridge) backoff(n int) time.Duration {
	d := b.opts.BackoffMin
	for i := 0; i < n && d < b.opts.BackoffMax; i++ {
		d *= 2
	}
	return min(d, b.opts.BackoffMax)
}

// sleep waits d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// joinMessage is MEWClient's join handshake (MEWClient.sendJoin).
type joinMessage struct {
	Type          string   `json:"type"`
	Space         string   `json:"space"`
	Token         string   `json:"token"`
	ParticipantID string   `json:"participantId"`
	Capabilities  []string `json:"capabilities"`
}

// welcome is what the bridge reads of system/welcome.
type welcome struct {
	Kind    string `json:"kind"`
	Payload struct {
		You struct {
			ID           string          `json:"id"`
			Capabilities json.RawMessage `json:"capabilities"`
		} `json:"you"`
	} `json:"payload"`
}

// join dials the gateway, sends the join message and waits for the
// welcome addressed to the bridge. It returns the connection and the
// capabilities the welcome gave (for the eviction probe).
func (b *Bridge) join(ctx context.Context) (*websocket.Conn, json.RawMessage, error) {
	jctx, cancel := context.WithTimeout(ctx, b.opts.JoinTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(jctx, b.opts.Gateway, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("bridge: dial %s: %w", b.opts.Gateway, err)
	}
	conn.SetReadLimit(-1) // readFrame bounds what it keeps
	msg, _ := json.Marshal(joinMessage{Type: "join", Space: b.opts.MEWSpace, Token: b.opts.Token,
		ParticipantID: b.opts.Participant, Capabilities: []string{}})
	if err := conn.Write(jctx, websocket.MessageText, msg); err != nil {
		_ = conn.CloseNow()
		return nil, nil, fmt.Errorf("bridge: send join: %w", err)
	}
	for {
		frame, kind, err := readFrame(jctx, conn)
		if err != nil {
			_ = conn.CloseNow()
			return nil, nil, fmt.Errorf("bridge: waiting for the welcome: %w", err)
		}
		if kind != "" {
			b.opts.Metrics.frame(b.opts.Participant, kind, ResultSkipped)
			b.seen("", ResultSkipped)
			continue
		}
		var w welcome
		if json.Unmarshal(frame, &w) == nil && w.Kind == "system/welcome" && w.Payload.You.ID == b.opts.Participant {
			b.handle(ctx, frame) // counted as a skipped system/welcome
			return conn, canonicalJSON(w.Payload.You.Capabilities), nil
		}
		if w.Kind == "system/error" {
			_ = conn.CloseNow()
			return nil, nil, fmt.Errorf("bridge: the gateway answered the join with an error: %.300s", frame)
		}
		// Anything before our welcome (there should be nothing) is
		// recorded as usual.
		b.handle(ctx, frame)
	}
}

// readFrame reads one message. A text message is returned whole when it
// is at most ledger.MaxEnvelopeBytes; a larger one is read to its end and
// dropped (kind KindOversize), as is a binary one (KindBinary).
func readFrame(ctx context.Context, conn *websocket.Conn) ([]byte, string, error) {
	typ, r, err := conn.Reader(ctx)
	if err != nil {
		return nil, "", err
	}
	buf, err := io.ReadAll(io.LimitReader(r, ledger.MaxEnvelopeBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(buf) > ledger.MaxEnvelopeBytes {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, "", err
		}
		return nil, KindOversize, nil
	}
	if typ != websocket.MessageText {
		return nil, KindBinary, nil
	}
	return buf, "", nil
}

// session reads frames until the connection ends, ctx is cancelled or
// the bridge is evicted, and returns why it ended.
func (b *Bridge) session(ctx context.Context, conn *websocket.Conn, caps json.RawMessage) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	if b.opts.ProbeInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.probe(sctx, caps, cancel)
		}()
	}
	defer wg.Wait()
	for {
		frame, kind, err := readFrame(sctx, conn)
		if err != nil {
			if c := context.Cause(sctx); c != nil && ctx.Err() == nil {
				return c
			}
			return disconnectReason(err)
		}
		switch kind {
		case KindOversize:
			b.opts.Metrics.frame(b.opts.Participant, kind, ResultRefused)
			b.seen("", ResultRefused)
			b.log.Warn().Str(logging.KeyCode, ledger.CodeOversize).Msgf("a frame over %d bytes was not recorded (the ledger refuses envelopes that large)", ledger.MaxEnvelopeBytes)
			continue
		case KindBinary:
			b.opts.Metrics.frame(b.opts.Participant, kind, ResultSkipped)
			b.seen("", ResultSkipped)
			continue
		}
		if ev := b.evictionNotice(frame); ev != nil {
			return ev
		}
		// The parent ctx: an eviction noticed while an append waits for
		// the ledger must not drop an envelope already received.
		b.handle(ctx, frame)
	}
}

// disconnectReason describes why a read failed.
func disconnectReason(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Errorf("the gateway closed the connection: %s (%d)", ce.Reason, ce.Code)
		}
		return fmt.Errorf("the gateway closed the connection (%d)", ce.Code)
	}
	return fmt.Errorf("connection lost: %w", err)
}

// presence is what evictionNotice reads of a system/presence frame.
type presence struct {
	Kind    string `json:"kind"`
	Payload struct {
		Event       string `json:"event"`
		Participant struct {
			ID string `json:"id"`
		} `json:"participant"`
	} `json:"payload"`
}

// evictionNotice returns ErrEvicted when a frame announces that another
// participant joined under the bridge's name (a gateway that tells the
// socket it replaces; MEW v0.11.0's does not, see probe).
func (b *Bridge) evictionNotice(frame []byte) error {
	if !bytes.Contains(frame, []byte(`system/presence`)) {
		return nil
	}
	var p presence
	if json.Unmarshal(frame, &p) != nil || p.Kind != "system/presence" {
		return nil
	}
	if p.Payload.Event == "join" && p.Payload.Participant.ID == b.opts.Participant {
		b.opts.Metrics.frame(b.opts.Participant, "system/presence", ResultSkipped)
		return fmt.Errorf("%w: the gateway announced another participant joining as %q", ErrEvicted, b.opts.Participant)
	}
	return nil
}

// participants is the gateway's GET /participants answer.
type participants struct {
	Participants []struct {
		ID           string          `json:"id"`
		Capabilities json.RawMessage `json:"capabilities"`
	} `json:"participants"`
}

// probe reads the gateway's participant list every ProbeInterval. MEW
// v0.11.0 replaces the bridge's socket silently when someone joins under
// its name (the old socket stays open and receives nothing), so the list
// is the only sign: the bridge's name gone (the impostor joined and left),
// or listed with other capabilities than the bridge's welcome gave (the
// impostor's token). An impostor holding the bridge's own token is not
// seen. A probe that fails (no such route, gateway busy) is ignored.
func (b *Bridge) probe(ctx context.Context, caps json.RawMessage, evict context.CancelCauseFunc) {
	t := time.NewTicker(b.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := b.probeOnce(ctx, caps); err != nil {
			if errors.Is(err, ErrEvicted) {
				evict(err)
				return
			}
			b.log.Debug().Err(err).Msg("participant probe failed")
		}
	}
}

func (b *Bridge) probeOnce(ctx context.Context, caps json.RawMessage) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.partsURL, nil)
	if err != nil {
		return err
	}
	resp, err := b.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", b.partsURL, resp.Status)
	}
	var ps participants
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&ps); err != nil {
		return fmt.Errorf("GET %s: %w", b.partsURL, err)
	}
	for _, p := range ps.Participants {
		if p.ID != b.opts.Participant {
			continue
		}
		if got := canonicalJSON(p.Capabilities); caps != nil && !bytes.Equal(got, caps) {
			return fmt.Errorf("%w: the gateway lists %q with capabilities %s, not the bridge's %s: another participant joined under its name", ErrEvicted, p.ID, got, caps)
		}
		return nil
	}
	return fmt.Errorf("%w: the gateway no longer lists %q: another participant joined under its name (and left)", ErrEvicted, b.opts.Participant)
}

// canonicalJSON re-encodes a JSON value (sorted object keys), nil for
// nothing or invalid JSON.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	out, _ := json.Marshal(v)
	return out
}

// handle classifies one frame and appends it when it is a lifecycle
// envelope.
func (b *Bridge) handle(ctx context.Context, frame []byte) {
	v := b.filter.Classify(frame)
	if !v.Append {
		b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultSkipped)
		b.log.Debug().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Str(KeyReason, v.Skip).Msg("skipped")
		b.seen(v.ID, ResultSkipped)
		return
	}
	b.seen(v.ID, b.appendFrame(ctx, frame, "", v))
}

// seen records one frame handled and its result; the last envelope seen
// is the last one skipped or answered by the ledger.
func (b *Bridge) seen(id, result string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frames++
	if result == ResultAppended {
		b.records++
	}
	if id != "" && result != ResultFailed {
		b.lastID = id
	}
}

// appendFrame appends one envelope, retrying with backoff while the
// ledger does not answer; a refusal is logged and counted, never retried.
// It returns the result (ResultAppended, ResultDuplicate, ResultRefused or
// ResultFailed).
func (b *Bridge) appendFrame(ctx context.Context, raw []byte, sender string, v Verdict) string {
	for attempt := 0; ; attempt++ {
		r, err := b.opts.Sink.Append(ctx, b.opts.Space, raw, sender)
		if err == nil {
			switch {
			case r.Error != nil:
				b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultRefused)
				b.log.Warn().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Str(KeySender, sender).Str(logging.KeyCode, r.Error.Code).
					Str("field", r.Error.Field).Msgf("the ledger refused an envelope: %s", r.Error.Message)
				return ResultRefused
			case r.Duplicate:
				b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultDuplicate)
				b.log.Debug().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Uint64("seq", r.Seq).Msg("duplicate")
				return ResultDuplicate
			default:
				b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultAppended)
				b.log.Debug().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Uint64("seq", r.Seq).Msg("appended")
				return ResultAppended
			}
		}
		if ctx.Err() != nil || errors.Is(err, ErrSenderUnsupported) {
			b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultFailed)
			b.log.Error().Err(err).Str(KeyKind, v.Kind).Str(KeyID, v.ID).Msg("an envelope was not recorded")
			return ResultFailed
		}
		wait := b.backoff(attempt)
		b.log.Warn().Err(err).Str(KeyKind, v.Kind).Str(KeyID, v.ID).Dur(KeyWait, wait).Msg("the ledger did not take an envelope; retrying")
		if !sleep(ctx, wait) {
			b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultFailed)
			b.log.Error().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Msg("an envelope was not recorded: the bridge is stopping")
			return ResultFailed
		}
	}
}

// reportGaps reports gaps in order, retrying each with backoff until the
// ledger takes it or ctx ends; it returns those not reported.
func (b *Bridge) reportGaps(ctx context.Context, gaps []ledger.Gap) []ledger.Gap {
	for i, g := range gaps {
		if !b.reportGap(ctx, g) {
			return gaps[i:]
		}
	}
	return nil
}

func (b *Bridge) reportGap(ctx context.Context, g ledger.Gap) bool {
	for attempt := 0; ; attempt++ {
		r, err := b.opts.Sink.Gap(ctx, b.opts.Space, g)
		if err == nil && r.Error == nil {
			b.opts.Metrics.gap(b.opts.Participant)
			b.mu.Lock()
			b.gaps++
			b.mu.Unlock()
			ev := b.log.Warn().Str(KeyGapID, ledger.GapID(g)).Str(KeyReason, g.Reason).Str(KeyID, g.LastEnvelope).
				Time("disconnected_at", g.DisconnectedAt).Uint64("seq", r.Seq)
			if !g.ReconnectedAt.IsZero() {
				ev = ev.Time("reconnected_at", g.ReconnectedAt)
			}
			ev.Msg("gap recorded")
			return true
		}
		b.opts.Metrics.gapError(b.opts.Participant)
		if err == nil {
			// Refused: cannot happen for a gap the bridge built; retrying
			// would not help.
			b.log.Error().Str(KeyGapID, ledger.GapID(g)).Str(logging.KeyCode, r.Error.Code).Msgf("the ledger refused a gap: %s", r.Error.Message)
			return true
		}
		wait := b.backoff(attempt)
		b.log.Warn().Err(err).Str(KeyGapID, ledger.GapID(g)).Dur(KeyWait, wait).Msg("cannot record a gap yet; retrying")
		if !sleep(ctx, wait) {
			return false
		}
	}
}
