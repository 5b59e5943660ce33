package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// The echo check (contract §14: eviction noticed within 2 s, whatever the
// impostor declares). MEW v0.11.0 sends every accepted envelope to every
// participant of the space, the sender included, through its map of
// participant ids to sockets; a participant joining under the bridge's id
// re-points the id to its own socket and the bridge's socket stays open
// and silent. So whenever the bridge's socket has been silent for
// EchoAfter, the bridge sends one envelope addressed to itself (kind
// mcp/response, the capability every MEW token has, id
// "ledger-echo:<participant>:<session>:<n>") and expects it back within
// EchoTimeout. It does not come back when another socket holds the id: the
// bridge is evicted. A busy space sends nothing (any frame resets the
// silence); a silent one costs one echo per EchoAfter: in the gateway's
// envelope-history.jsonl one "received" line and one "delivered" line per
// participant, and one frame to each participant (which MEW agents ignore:
// a response to no request of theirs). Every bridge and history follower
// skips echoes (theirs and other recorders') without counting them as
// frames.

// EchoPrefix begins the id of every echo envelope.
const EchoPrefix = "ledger-echo:"

// KindEcho labels an echo envelope in the bridge's metrics.
const KindEcho = "ledger-echo"

// Defaults of the echo check.
const (
	DefaultEchoAfter   = time.Second
	DefaultEchoTimeout = 800 * time.Millisecond
)

// isEcho reports whether frame is an echo envelope of any recorder and
// returns its id.
func isEcho(frame []byte) (string, bool) {
	if !bytes.Contains(frame, []byte(EchoPrefix)) {
		return "", false
	}
	var env struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(frame, &env) != nil || !strings.HasPrefix(env.ID, EchoPrefix) {
		return "", false
	}
	return env.ID, true
}

// echoer is one session's echo check: the reader notes every frame and
// hands echoes over; the checker sends echoes during silence.
type echoer struct {
	b      *Bridge
	last   atomic.Int64 // Unix ns of the last frame read
	mu     sync.Mutex
	want   string        // the echo in flight
	got    chan struct{} // closed when it came back
	n      int
	prefix string
}

func (b *Bridge) newEchoer() *echoer {
	e := &echoer{b: b, prefix: fmt.Sprintf("%s%s:%s:", EchoPrefix, b.opts.Participant, b.sessionID)}
	e.last.Store(time.Now().UnixNano())
	return e
}

// frame notes a frame read; it reports whether the frame was an echo
// (handled: not to be classified or counted).
func (e *echoer) frame(frame []byte) bool {
	e.last.Store(time.Now().UnixNano())
	id, ok := isEcho(frame)
	if !ok {
		return false
	}
	e.mu.Lock()
	if id == e.want && e.got != nil {
		close(e.got)
		e.got, e.want = nil, ""
	}
	e.mu.Unlock()
	e.b.opts.Metrics.frame(e.b.opts.Participant, KindEcho, ResultSkipped)
	return true
}

// run sends an echo whenever the socket has been silent for EchoAfter
// and ends the session (ErrEvicted) when one does not come back within
// EchoTimeout, until ctx ends.
func (e *echoer) run(ctx context.Context, conn *websocket.Conn, end context.CancelCauseFunc) {
	after, timeout := e.b.opts.EchoAfter, e.b.opts.EchoTimeout
	t := time.NewTimer(after)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if silent := time.Since(time.Unix(0, e.last.Load())); silent < after {
			t.Reset(after - silent)
			continue
		}
		e.mu.Lock()
		e.n++
		id := fmt.Sprintf("%s%d", e.prefix, e.n)
		got := make(chan struct{})
		e.want, e.got = id, got
		e.mu.Unlock()
		msg, _ := json.Marshal(map[string]any{"protocol": "mew/v0.4", "id": id, "ts": time.Now().UTC().Format(time.RFC3339Nano),
			"from": e.b.opts.Participant, "to": []string{e.b.opts.Participant}, "kind": "mcp/response",
			"payload": map[string]any{"ledger_echo": e.n}})
		sent := time.Now()
		wctx, cancel := context.WithTimeout(ctx, timeout)
		err := conn.Write(wctx, websocket.MessageText, msg)
		if err == nil {
			select {
			case <-got:
			case <-wctx.Done():
				err = wctx.Err()
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			ev := fmt.Errorf("%w: the bridge's own message %s did not come back within %v (the gateway delivers to another socket under %q: another participant joined under its name)",
				ErrEvicted, id, timeout, e.b.opts.Participant)
			e.b.setState(StateEvicted, ev.Error())
			end(ev)
			return
		}
		e.b.opts.Metrics.echo(e.b.opts.Participant, time.Since(sent))
		t.Reset(after)
	}
}
