package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
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
	KeySession  = "session"
)

// KindOversize labels a text frame over ledger.MaxEnvelopeBytes: the
// ledger would refuse it, so it is counted and not sent.
const KindOversize = "oversize"

// ErrEvicted is the cause of a session ended because another participant
// joined the MEW space under the bridge's name.
var ErrEvicted = errors.New("bridge: evicted")

// ErrHostile is the cause of a session the bridge ended because the
// gateway misbehaved (a ping storm, an endless frame).
var ErrHostile = errors.New("bridge: hostile gateway")

// Bridge records one MEW space into the ledger (contract §14). Create it with
// New and call Run once; Run owns every goroutine the bridge starts.
//
// Inside, one reader (the gateway connection, or the history file)
// classifies frames and queues lifecycle envelopes in a bounded backlog;
// one writer appends them in receive order, in batches, through the
// Sink. The reader never waits for the ledger: an envelope that does not
// fit the backlog is dropped, and the hole is recorded as a gap before
// the next envelope that fits.
type Bridge struct {
	opts      Options
	log       zerolog.Logger
	filter    *Filter
	partsURL  string
	q         *backlog
	sessionID string

	// reader only
	recvN uint64
	// writer only
	lastGapNs int64
	// markPrev and markDups are the Prev and Dups of the next batch's
	// mark (ledger.BridgeMark): the sequence of the last envelope of this
	// connection the ledger answered (stored, or duplicate of the one at
	// that sequence), 0 after each gap; and the duplicates so far.
	markPrev uint64
	markDups int64

	mu      sync.Mutex
	state   string
	since   time.Time
	reason  string
	firstAt time.Time // the first join (history: the start): the first window's start
	lastID  string
	lastN   uint64
	stored  storedMark
	gaps    int
	records int
	dups    int
	frames  int
	drops   int
}

// storedMark is the last envelope the ledger stored (or had) from this
// bridge: the start of the next gap's window.
type storedMark struct {
	id  string
	seq uint64
	at  time.Time // when the bridge received it
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
	b.q = newBacklog(o.MaxBacklogBytes, b.dropGap)
	b.sessionID = fmt.Sprintf("%d-%08x", o.Now().UnixNano(), rand.Uint32())
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
	Reason       string    `json:"reason,omitempty"`
	LastEnvelope string    `json:"last_envelope,omitempty"`
	// LastStored and LastSeq name the last envelope the ledger stored
	// from the bridge: where the next gap's window would start.
	LastStored string `json:"last_stored,omitempty"`
	LastSeq    uint64 `json:"last_seq,omitempty"`
	Frames     int    `json:"frames"`
	Appended   int    `json:"appended"`
	// Duplicates counts the envelopes the ledger already had (stored
	// first by another recorder, or by an earlier run): not stored again.
	Duplicates int `json:"duplicates"`
	Gaps       int `json:"gaps"`
	// Backlog is the envelopes received and not yet answered by the
	// ledger; Dropped those the bridge dropped because the backlog was
	// full (each inside a recorded gap).
	Backlog      int `json:"backlog"`
	BacklogBytes int `json:"backlog_bytes"`
	Dropped      int `json:"dropped"`
}

// Health returns the bridge's current state.
func (b *Bridge) Health() Health {
	n, nb := b.q.len()
	b.mu.Lock()
	defer b.mu.Unlock()
	return Health{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Space: b.opts.Space, State: b.state,
		Since: b.since, Reason: b.reason, LastEnvelope: b.lastID, LastStored: b.stored.id, LastSeq: b.stored.seq,
		Frames: b.frames, Appended: b.records, Duplicates: b.dups, Gaps: b.gaps, Backlog: n, BacklogBytes: nb, Dropped: b.drops}
}

func (b *Bridge) setState(s, reason string) {
	b.mu.Lock()
	if b.state != s {
		b.state, b.since = s, b.opts.Now()
	}
	b.reason = reason
	b.mu.Unlock()
	b.opts.Metrics.setState(b.opts.Participant, s)
}

// Run records until ctx is cancelled, then records the open gap and
// returns nil; what is still in the backlog gets StopTimeout to be
// stored. It reconnects with capped, jittered backoff whenever the
// connection ends, and records each disconnection as a gap once joined
// again. With HistoryFile it follows the file instead.
func (b *Bridge) Run(ctx context.Context) error {
	wctx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWriter()
	written := make(chan struct{})
	go func() {
		defer close(written)
		b.write(wctx)
	}()
	drain := false // --once: wait for the writer to store everything
	defer func() {
		b.q.close()
		if drain {
			select {
			case <-written:
			case <-ctx.Done():
			}
		}
		t := time.AfterFunc(b.opts.StopTimeout, stopWriter)
		<-written
		t.Stop()
		if n, _ := b.q.len(); n > 0 {
			b.opts.Metrics.frames(b.opts.Participant, KindOther, ResultFailed, n)
			b.log.Error().Int("envelopes", n).Dur("stop_timeout", b.opts.StopTimeout).
				Msg("the ledger did not take the backlog before the bridge stopped: these envelopes are not recorded (the ledger records the hole when the bridge starts again)")
		}
		b.setState(StateStopped, "")
		b.log.Info().Msg("bridge stopped")
	}()
	b.log.Info().Str(KeyGateway, b.opts.Gateway).Str(KeyHistory, b.opts.HistoryFile).Str(KeySession, b.sessionID).Msg("bridge starting")
	lost, ok := b.learn(ctx)
	if !ok {
		return nil
	}
	if b.opts.HistoryFile != "" {
		if lost != nil {
			b.q.push(item{gap: lost})
		}
		b.log.Info().Str(KeyHistory, b.opts.HistoryFile).Bool("once", b.opts.Once).Msg("following the gateway's envelope history")
		err := b.follow(ctx)
		switch {
		case b.opts.Once && err == nil && ctx.Err() == nil:
			// The file's end is the end of what this recorder saw.
			now := b.opts.Now()
			b.q.push(item{gap: &ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: b.opts.HistoryFile,
				NoticedAt: now, Session: b.sessionID, Reason: "history file read to its end (--once)"}})
			drain = true
		case err == nil && ctx.Err() != nil:
			// Stopped: what the gateway logs from now on is nobody's
			// record until the follower starts again (its window starts
			// at the last envelope the ledger answered it).
			b.q.push(item{gap: &ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: b.opts.HistoryFile,
				NoticedAt: b.opts.Now(), Session: b.sessionID, Reason: "bridge stopped"}})
		}
		return err
	}
	open := lost // the gap to record once joined (again)
	failures := 0
	for ctx.Err() == nil {
		b.setState(StateConnecting, "")
		conn, g, caps, err := b.join(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			wait := b.backoff(failures)
			failures++
			b.setState(StateDisconnected, err.Error())
			b.log.Warn().Err(err).Dur(KeyWait, wait).Msg("cannot join the MEW space; retrying")
			if !sleep(ctx, wait) {
				break
			}
			continue
		}
		failures = 0
		joined := b.opts.Now()
		b.mu.Lock()
		if b.firstAt.IsZero() {
			b.firstAt = joined
		}
		b.mu.Unlock()
		if open != nil {
			open.ReconnectedAt = joined
			b.q.push(item{gap: open})
			open = nil
		}
		b.setState(StateJoined, "")
		b.log.Info().Str(KeyGateway, b.opts.Gateway).Msg("joined the MEW space: recording")

		cause := b.session(ctx, conn, g, caps)
		_ = conn.CloseNow()
		noticed := b.opts.Now()
		dropped, dropFrom := b.q.takeDrops()
		gap := &ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: b.opts.Gateway,
			NoticedAt: noticed, Reason: cause.Error(), Session: b.sessionID, Dropped: dropped}
		if !dropFrom.IsZero() {
			gap.DisconnectedAt = dropFrom // the writer takes the earlier of this and the last stored
		}
		if ctx.Err() != nil {
			gap.Reason = "bridge stopped"
			b.q.push(item{gap: gap})
			break
		}
		open = gap
		if errors.Is(cause, ErrEvicted) {
			b.setState(StateEvicted, gap.Reason)
		} else {
			b.setState(StateDisconnected, gap.Reason)
		}
		switch {
		case errors.Is(cause, ErrEvicted):
			b.log.Error().Str(KeyReason, gap.Reason).
				Msg("EVICTED from the MEW space: another participant joined under the bridge's name; everything the space carried since is missing from the ledger (recorded as a gap). Rejoining takes the name back; make the bridge's participant id unique")
		case errors.Is(cause, ErrHostile):
			b.log.Error().Str(KeyReason, gap.Reason).Msg("the gateway misbehaved: connection ended; reconnecting (the gap will be recorded)")
		default:
			b.log.Warn().Str(KeyReason, gap.Reason).Msg("disconnected from the MEW gateway; reconnecting (the gap will be recorded)")
		}
		if !sleep(ctx, b.jitter(b.opts.BackoffMin)) {
			break
		}
	}
	if open != nil {
		// Stopped while disconnected: the hole stays open.
		open.Reason += "; then the bridge stopped"
		b.q.push(item{gap: open})
	}
	return nil
}

// backoff is the wait before reconnection attempt n (0-based): BackoffMin
// doubled n times, at most BackoffMax, with jitter (between half of it
// and all of it), so that bridges of one gateway do not come back in
// step.
func (b *Bridge) backoff(n int) time.Duration {
	d := b.opts.BackoffMin
	for i := 0; i < n && d < b.opts.BackoffMax; i++ {
		d *= 2
	}
	return b.jitter(min(d, b.opts.BackoffMax))
}

// jitter returns a duration in [d/2, d].
func (b *Bridge) jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
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

// guard watches one connection for hostile input: a ping storm (more
// than PingLimit pings in a second) or an endless frame (one taking
// longer than FrameTimeout, or over MaxFrameBytes). The first failure is
// kept and ends the reads (the read context is cancelled).
type guard struct {
	limit  int
	mu     sync.Mutex
	err    error
	cancel context.CancelCauseFunc
	pings  int
	window time.Time
}

func (g *guard) setCancel(c context.CancelCauseFunc) {
	g.mu.Lock()
	g.cancel = c
	err := g.err
	g.mu.Unlock()
	if err != nil {
		c(err)
	}
}

func (g *guard) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	c := g.cancel
	g.mu.Unlock()
	if c != nil {
		c(err)
	}
}

func (g *guard) reason() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// onPing counts pings; over the limit it fails the connection and does
// not answer.
func (g *guard) onPing(context.Context, []byte) bool {
	g.mu.Lock()
	now := time.Now()
	if now.Sub(g.window) > time.Second {
		g.window, g.pings = now, 0
	}
	g.pings++
	storm := g.pings > g.limit
	g.mu.Unlock()
	if storm {
		g.fail(fmt.Errorf("%w: ping storm (over %d pings a second)", ErrHostile, g.limit))
		return false
	}
	return true
}

// join dials the gateway, sends the join message and waits for the
// welcome addressed to the bridge. It returns the connection, its guard
// and the capabilities the welcome gave (for the eviction probe).
func (b *Bridge) join(ctx context.Context) (*websocket.Conn, *guard, json.RawMessage, error) {
	jctx, cancel := context.WithTimeout(ctx, b.opts.JoinTimeout)
	defer cancel()
	g := &guard{limit: b.opts.PingLimit}
	conn, _, err := websocket.Dial(jctx, b.opts.Gateway, &websocket.DialOptions{OnPingReceived: g.onPing})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bridge: dial %s: %w", b.opts.Gateway, err)
	}
	rctx, rcancel := context.WithCancelCause(jctx)
	defer rcancel(nil)
	g.setCancel(rcancel)
	fail := func(format string, err error) (*websocket.Conn, *guard, json.RawMessage, error) {
		_ = conn.CloseNow()
		if r := g.reason(); r != nil {
			err = r
		}
		return nil, nil, nil, fmt.Errorf(format, err)
	}
	conn.SetReadLimit(-1) // readFrame bounds what it keeps
	msg, _ := json.Marshal(joinMessage{Type: "join", Space: b.opts.MEWSpace, Token: b.opts.Token,
		ParticipantID: b.opts.Participant, Capabilities: []string{}})
	if err := conn.Write(rctx, websocket.MessageText, msg); err != nil {
		return fail("bridge: send join: %w", err)
	}
	for {
		frame, kind, err := b.readFrame(rctx, conn, g)
		if err != nil {
			return fail("bridge: waiting for the welcome: %w", err)
		}
		if kind != "" {
			b.skip(kind, "", ResultSkipped)
			continue
		}
		var w welcome
		if json.Unmarshal(frame, &w) == nil && w.Kind == "system/welcome" && w.Payload.You.ID == b.opts.Participant {
			b.receive(ctx, frame, "") // counted as a skipped system/welcome
			return conn, g, canonicalJSON(w.Payload.You.Capabilities), nil
		}
		if w.Kind == "system/error" {
			return fail("bridge: the gateway answered the join with an error: %w", fmt.Errorf("%.300s", frame))
		}
		// Anything before our welcome (there should be nothing) is
		// recorded as usual.
		b.receive(ctx, frame, "")
	}
}

// readFrame reads one message. A text message is returned whole when it
// is at most ledger.MaxEnvelopeBytes; a larger one is read to its end and
// dropped (kind KindOversize); a binary one is MEW stream data (the real
// gateway sends "#<stream>#<data>" as binary messages: KindStream). A
// message over MaxFrameBytes, or taking longer than FrameTimeout, fails
// the connection (ErrHostile).
func (b *Bridge) readFrame(ctx context.Context, conn *websocket.Conn, g *guard) ([]byte, string, error) {
	typ, r, err := conn.Reader(ctx)
	if err != nil {
		return nil, "", err
	}
	t := time.AfterFunc(b.opts.FrameTimeout, func() {
		g.fail(fmt.Errorf("%w: endless frame (one message took over %v)", ErrHostile, b.opts.FrameTimeout))
	})
	defer t.Stop()
	buf, err := io.ReadAll(io.LimitReader(r, ledger.MaxEnvelopeBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(buf) > ledger.MaxEnvelopeBytes {
		n, err := io.Copy(io.Discard, io.LimitReader(r, b.opts.MaxFrameBytes-int64(len(buf))+1))
		if err != nil {
			return nil, "", err
		}
		if n+int64(len(buf)) > b.opts.MaxFrameBytes {
			err := fmt.Errorf("%w: endless frame (one message over %d bytes)", ErrHostile, b.opts.MaxFrameBytes)
			g.fail(err)
			return nil, "", err
		}
		return nil, KindOversize, nil
	}
	if typ != websocket.MessageText {
		return nil, KindStream, nil
	}
	return buf, "", nil
}

// session reads frames until the connection ends, ctx is cancelled, the
// gateway misbehaves or the bridge is evicted, and returns why it ended.
// A read error ends it at once: the probe is cancelled before it is
// waited for.
func (b *Bridge) session(ctx context.Context, conn *websocket.Conn, g *guard, caps json.RawMessage) error {
	sctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()   // second: the probe has been told to stop
	defer cancel(nil) // first
	g.setCancel(cancel)
	if b.opts.ProbeInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.probe(sctx, conn, caps, cancel)
		}()
	}
	echo := b.newEchoer()
	if b.opts.EchoAfter > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			echo.run(sctx, conn, cancel)
		}()
	}
	for {
		frame, kind, err := b.readFrame(sctx, conn, g)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r := g.reason(); r != nil {
				return r
			}
			if c := context.Cause(sctx); c != nil && !errors.Is(c, context.Canceled) {
				return c
			}
			return disconnectReason(err)
		}
		echo.last.Store(time.Now().UnixNano()) // any frame: the gateway still delivers to this socket
		switch kind {
		case KindOversize:
			b.skip(kind, "", ResultRefused)
			b.log.Warn().Str(logging.KeyCode, api.CodeOversize).Msgf("a frame over %d bytes was not recorded (the ledger refuses envelopes that large)", ledger.MaxEnvelopeBytes)
			continue
		case KindStream:
			b.skip(kind, "", ResultSkipped)
			continue
		}
		if echo.frame(frame) {
			continue
		}
		if ev := b.evictionNotice(frame); ev != nil {
			return ev
		}
		b.receive(ctx, frame, "")
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

// probe checks the connection every ProbeInterval. It pings the gateway
// (a socket that stopped answering ends the session), and reads its
// participant list: MEW v0.11.0 replaces the bridge's socket silently
// when someone joins under its name (the old socket stays open and
// receives nothing), so the list shows the bridge's name gone (the
// impostor joined and left), or listed with other capabilities than the
// bridge's welcome gave (the impostor's token). An impostor holding the
// bridge's own token is not seen here: the echo check (echo.go) sees it. A participant list that cannot be
// read ends the session too (the bridge cannot say it is recording); one
// the gateway does not serve (an HTTP error status) is logged once.
func (b *Bridge) probe(ctx context.Context, conn *websocket.Conn, caps json.RawMessage, end context.CancelCauseFunc) {
	t := time.NewTicker(b.opts.ProbeInterval)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(b.opts.ProbeInterval, time.Second))
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				end(fmt.Errorf("the gateway does not answer pings: %w", err))
			}
			return
		}
		err = b.probeOnce(ctx, caps)
		var se *statusError
		switch {
		case err == nil:
		case errors.Is(err, ErrEvicted):
			b.setState(StateEvicted, err.Error())
			end(err)
			return
		case errors.As(err, &se):
			if !warned {
				b.log.Warn().Err(err).Msg("the gateway does not serve its participant list: an eviction would not be noticed")
				warned = true
			}
		default:
			if ctx.Err() == nil {
				end(fmt.Errorf("the gateway's participant list cannot be read: %w", err))
			}
			return
		}
	}
}

// statusError is a participant list answered with an error status.
type statusError struct{ msg string }

func (e *statusError) Error() string { return e.msg }

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
		return &statusError{fmt.Sprintf("GET %s: %s", b.partsURL, resp.Status)}
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

// receive classifies one frame (with sender, from the history file)
// and queues it when it is a lifecycle envelope; an envelope that does
// not fit the backlog is dropped and counted, and the hole becomes a gap
// recorded before the next envelope that fits.
func (b *Bridge) receive(ctx context.Context, frame []byte, sender string) {
	v := b.filter.Classify(frame)
	if !v.Append {
		if v.Skip == SkipReserved {
			b.skip(v.Kind, v.ID, ResultReserved)
			b.log.Warn().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Str(KeySender, v.From).Str(KeyReason, v.Skip).
				Msg("skipped an envelope that claims to be the ledger's own: only the ledger writes these")
			return
		}
		b.skip(v.Kind, v.ID, ResultSkipped)
		b.log.Debug().Str(KeyKind, v.Kind).Str(KeyID, v.ID).Str(KeyReason, v.Skip).Msg("skipped")
		return
	}
	b.recvN++
	it := item{n: b.recvN, raw: frame, sender: sender, v: v, at: b.opts.Now()}
	if sender != "" || b.opts.HistoryFile != "" {
		// The history file keeps what is not read yet: wait for room.
		if !b.q.pushWait(ctx, it) {
			b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultFailed)
			b.seen(it.n, v.ID, ResultFailed)
		}
		return
	}
	taken, first := b.q.push(it)
	if taken {
		return
	}
	if first {
		b.log.Error().Int("max_backlog_bytes", b.opts.MaxBacklogBytes).
			Msg("backlog full: the ledger is slower than the space; dropping envelopes until there is room (the hole is recorded as a gap)")
	}
	b.opts.Metrics.frame(b.opts.Participant, v.Kind, ResultDropped)
	b.mu.Lock()
	b.drops++
	b.mu.Unlock()
	b.seen(it.n, v.ID, ResultDropped)
}

// dropGap is the gap of envelopes dropped from a full backlog: received
// from `from`, until `to` (the next envelope that fit, or the backlog
// drained).
func (b *Bridge) dropGap(dropped int, from, to time.Time) *ledger.Gap {
	return &ledger.Gap{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Gateway: b.opts.Gateway,
		DisconnectedAt: from, NoticedAt: from, ReconnectedAt: to, Session: b.sessionID, Dropped: dropped,
		Reason: fmt.Sprintf("backlog full (%d bytes): %d envelopes received and dropped while the ledger was slower than the space", b.opts.MaxBacklogBytes, dropped)}
}

// skip counts a frame that is not sent.
func (b *Bridge) skip(kind, id, result string) {
	b.opts.Metrics.frame(b.opts.Participant, kind, result)
	b.recvN++
	b.seen(b.recvN, id, result)
}

// seen records one frame handled and its result; the last envelope seen
// is that of the latest frame (in receive order) skipped or answered by
// the ledger.
func (b *Bridge) seen(n uint64, id, result string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frames++
	switch result {
	case ResultAppended:
		b.records++
	case ResultDuplicate:
		b.dups++
	}
	if id != "" && result != ResultFailed && result != ResultDropped && n > b.lastN {
		b.lastID, b.lastN = id, n
	}
}

// write is the writer: it takes batches from the backlog in order and
// appends them, or records the gap a marker stands for, until the
// backlog is closed and empty or ctx ends.
func (b *Bridge) write(ctx context.Context) {
	for {
		batch := b.q.take(ctx, b.opts.BatchSize)
		if batch == nil {
			return
		}
		if batch[0].gap != nil {
			b.recordGap(ctx, batch[0].gap)
			continue
		}
		b.appendBatch(ctx, batch)
		b.q.done(len(batch))
	}
}

// appendBatch appends one batch, repeating it with backoff while the
// ledger does not answer (appends are idempotent); a refusal is logged
// and counted, never retried.
func (b *Bridge) appendBatch(ctx context.Context, batch []item) {
	mark := ledger.BridgeMark{Bridge: b.opts.Participant, MEWSpace: b.opts.MEWSpace, Session: b.sessionID, Received: batch[0].at,
		Prev: b.markPrev, Dups: b.markDups, History: b.opts.HistoryFile != ""}.String()
	envs := make([]Envelope, len(batch))
	for i, it := range batch {
		envs[i] = Envelope{Raw: it.raw, Sender: it.sender, Mark: mark}
	}
	var rs []api.AppendResult
	for attempt := 0; ; attempt++ {
		var err error
		rs, err = b.opts.Sink.AppendBatch(ctx, b.opts.Space, envs)
		if err == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(err, ErrSenderUnsupported) {
			for _, it := range batch {
				b.opts.Metrics.frame(b.opts.Participant, it.v.Kind, ResultFailed)
				b.seen(it.n, it.v.ID, ResultFailed)
			}
			b.log.Error().Err(err).Int("envelopes", len(batch)).Msg("envelopes were not recorded")
			return
		}
		wait := b.backoff(attempt)
		b.log.Warn().Err(err).Int("envelopes", len(batch)).Dur(KeyWait, wait).Msg("the ledger did not take a batch; retrying")
		if !sleep(ctx, wait) {
			for _, it := range batch {
				b.opts.Metrics.frame(b.opts.Participant, it.v.Kind, ResultFailed)
				b.seen(it.n, it.v.ID, ResultFailed)
			}
			b.log.Error().Int("envelopes", len(batch)).Msg("envelopes were not recorded: the bridge is stopping")
			return
		}
	}
	now := time.Now()
	for i, it := range batch {
		r := rs[i]
		result := ResultAppended
		switch {
		case r.Error != nil:
			result = ResultRefused
			b.log.Warn().Str(KeyKind, it.v.Kind).Str(KeyID, it.v.ID).Str(KeySender, it.sender).Str(logging.KeyCode, r.Error.Code).
				Str("field", r.Error.Field).Msgf("the ledger refused an envelope: %s", r.Error.Message)
		case r.Duplicate:
			result = ResultDuplicate
		}
		if result == ResultDuplicate {
			b.markDups++
		}
		if result != ResultRefused && r.Seq > 0 {
			b.markPrev = r.Seq
		}
		if result != ResultRefused {
			b.mu.Lock()
			if r.Seq >= b.stored.seq || r.Duplicate {
				b.stored = storedMark{id: it.v.ID, seq: r.Seq, at: it.at}
			}
			b.mu.Unlock()
			if b.opts.OnStored != nil {
				b.opts.OnStored(it.at, now)
			}
		}
		b.opts.Metrics.frame(b.opts.Participant, it.v.Kind, result)
		b.seen(it.n, it.v.ID, result)
	}
}

// recordGap completes a gap marker with the start of its window — the
// last envelope the ledger stored from this bridge, and when the bridge
// received it (or, before any, the first join) — and records it,
// retrying with backoff until the ledger takes it or ctx ends.
func (b *Bridge) recordGap(ctx context.Context, g *ledger.Gap) {
	b.mu.Lock()
	st := b.stored
	b.mu.Unlock()
	g.LastEnvelope, g.LastSeq = st.id, st.seq
	start := st.at
	if start.IsZero() {
		start = b.startedAt()
	}
	if !g.DisconnectedAt.IsZero() && g.DisconnectedAt.Before(start) {
		start = g.DisconnectedAt
	}
	// Gap ids are the bridge and the window's start: two gaps after the
	// same last envelope get distinct ones.
	if ns := start.UnixNano(); ns <= b.lastGapNs {
		start = time.Unix(0, b.lastGapNs+1)
	}
	g.DisconnectedAt = start.UTC()
	b.lastGapNs = g.DisconnectedAt.UnixNano()
	if !g.ReconnectedAt.IsZero() && g.ReconnectedAt.Before(g.DisconnectedAt) {
		g.ReconnectedAt = g.DisconnectedAt
	}
	if !g.NoticedAt.IsZero() && g.NoticedAt.Before(g.DisconnectedAt) {
		g.NoticedAt = g.DisconnectedAt
	}
	b.reportGap(ctx, *g)
	// What follows the gap is another connection: its marks place it
	// only by what it saw itself.
	b.markPrev = 0
}

// startedAt is the first join (or, in history mode, the start of Run).
func (b *Bridge) startedAt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.firstAt
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
				Uint64("last_seq", g.LastSeq).Time("disconnected_at", g.DisconnectedAt).Uint64("seq", r.Seq)
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
			b.log.Error().Str(KeyGapID, ledger.GapID(g)).Str(KeyReason, g.Reason).Msg("could not record a gap before stopping: the ledger does not show it (it records the hole when the bridge starts again)")
			return false
		}
	}
}
