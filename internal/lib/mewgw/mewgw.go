// Package mewgw is a stand-in MEW gateway for tests and for `ledger bench`'s
// bridge figure (which runs it in a child process): it speaks the real
// MEW v0.11.0 join exchange over WebSocket (src/cli/commands/gateway.ts:
// a {"type":"join","space","token","participantId","capabilities"} message
// — or {"kind":"system/join","payload":{...}} — answered by system/welcome
// to the joiner and system/presence join to the others) and serves
// GET /participants?space=ID, and lets a test replay captured frames byte
// for byte, drop a participant's connection, and evict a participant by a
// duplicate join exactly as the real gateway does: the new socket replaces
// the old one in the space, which stays open and receives nothing more.
//
// Frames a joined client sends are broadcast to the space as they are
// (the real gateway fills id/ts/from first; tests that need that send
// complete envelopes). It is not a MEW implementation: capability checks,
// streams and the HTTP injection API are left out.
package mewgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Gateway is a running stand-in gateway. Close it when done.
type Gateway struct {
	ln  net.Listener
	srv *http.Server
	// Tokens maps a token to the capabilities the welcome gives; any other
	// token gets DefaultCapabilities. Both get the baseline mcp-response
	// capability, as the real gateway adds it.
	tokens map[string][]map[string]any

	mu     sync.Mutex
	spaces map[string]map[string]*peer // space -> participant -> socket
	caps   map[string][]map[string]any // participant -> capabilities of its latest join
	joins  map[string]int              // participant -> joins so far
	cond   *sync.Cond
	seq    int64
	wg     sync.WaitGroup
	closed bool
	paused bool // joins are refused (the connection closed) while set
	notify bool // a replaced socket gets the presence join of its replacement

	history *historyLog // the envelope history (RecordHistory), nil: none
}

type peer struct {
	conn *websocket.Conn
	wmu  sync.Mutex
}

// DefaultCapabilities are those of an unknown token (the real gateway's
// fallback without a space.yaml default).
var DefaultCapabilities = []map[string]any{{"kind": "chat"}}

var baseline = map[string]any{"id": "mcp-response", "kind": "mcp/response"}

// Start starts a gateway on a loopback port. tokens maps tokens to
// capabilities (nil: every token gets DefaultCapabilities).
func Start(tokens map[string][]map[string]any) *Gateway {
	g, _ := StartOn("", tokens)
	return g
}

// StartOn starts a gateway listening on addr ("" : a free loopback port).
func StartOn(addr string, tokens map[string][]map[string]any) (*Gateway, error) {
	g := &Gateway{tokens: tokens, spaces: map[string]map[string]*peer{}, caps: map[string][]map[string]any{}, joins: map[string]int{}}
	g.cond = sync.NewCond(&g.mu)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /participants", g.participants)
	mux.HandleFunc("/", g.ws)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	g.ln = ln
	g.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		_ = g.srv.Serve(ln) // ends with ErrServerClosed when Close closes it
	}()
	return g, nil
}

// URL is the gateway's WebSocket URL (ws://127.0.0.1:PORT).
func (g *Gateway) URL() string { return "ws://" + g.ln.Addr().String() }

// Addr is host:port.
func (g *Gateway) Addr() string { return g.ln.Addr().String() }

// Close closes every connection and the server, and waits for the
// connection goroutines.
func (g *Gateway) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	var all []*peer
	for _, sp := range g.spaces {
		for _, p := range sp {
			all = append(all, p)
		}
	}
	g.cond.Broadcast()
	hist := g.history
	g.mu.Unlock()
	for _, p := range all {
		_ = p.conn.CloseNow()
	}
	if hist != nil {
		hist.close()
	}
	_ = g.srv.Close() // the listener and every connection not hijacked; the sockets are closed above
	g.wg.Wait()
}

func (g *Gateway) capabilities(token string) []map[string]any {
	c, ok := g.tokens[token]
	if !ok {
		c = DefaultCapabilities
	}
	out := append([]map[string]any{}, c...)
	return append(out, baseline)
}

// join is the handshake, in both accepted spellings.
type join struct {
	Type          string `json:"type"`
	Kind          string `json:"kind"`
	Space         string `json:"space"`
	Token         string `json:"token"`
	ParticipantID string `json:"participantId"`
	Payload       *struct {
		Space         string `json:"space"`
		Token         string `json:"token"`
		ParticipantID string `json:"participantId"`
	} `json:"payload"`
}

func (g *Gateway) ws(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		_ = conn.CloseNow()
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	defer g.wg.Done()
	conn.SetReadLimit(-1)
	p := &peer{conn: conn}
	ctx := context.Background()
	var space, id string
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			g.leave(space, id, p)
			return
		}
		if id == "" {
			var j join
			if json.Unmarshal(data, &j) != nil {
				continue
			}
			if j.Kind == "system/join" && j.Payload != nil {
				j.Space, j.Token, j.ParticipantID = j.Payload.Space, j.Payload.Token, j.Payload.ParticipantID
			} else if j.Type != "join" {
				continue
			}
			if j.ParticipantID == "" || j.Space == "" {
				continue
			}
			g.mu.Lock()
			paused := g.paused
			g.mu.Unlock()
			if paused {
				_ = conn.Close(websocket.StatusTryAgainLater, "gateway paused")
				return
			}
			space, id = j.Space, j.ParticipantID
			g.join(space, id, j.Token, p)
			continue
		}
		g.Broadcast(space, data)
	}
}

func (g *Gateway) now() (string, int64) {
	g.seq++
	t := time.Now().UTC()
	return t.Format("2006-01-02T15:04:05.000Z"), t.UnixMilli()*1000 + g.seq%1000
}

func (g *Gateway) join(space, id, token string, p *peer) {
	g.mu.Lock()
	sp := g.spaces[space]
	if sp == nil {
		sp = map[string]*peer{}
		g.spaces[space] = sp
	}
	caps := g.capabilities(token)
	replaced := sp[id]
	sp[id] = p // a duplicate id replaces the socket; the old one stays open, silent
	g.caps[id] = caps
	g.joins[id]++
	var others []map[string]any
	for pid := range sp {
		if pid != id {
			others = append(others, map[string]any{"id": pid, "capabilities": g.caps[pid]})
		}
	}
	if others == nil {
		others = []map[string]any{}
	}
	ts, n := g.now()
	welcome, _ := json.Marshal(map[string]any{"protocol": "mew/v0.4", "id": fmt.Sprintf("welcome-%d", n), "ts": ts,
		"from": "system:gateway", "to": []string{id}, "kind": "system/welcome",
		"payload": map[string]any{"you": map[string]any{"id": id, "capabilities": caps}, "participants": others, "active_streams": []any{}}})
	presence, _ := json.Marshal(map[string]any{"protocol": "mew/v0.4", "id": fmt.Sprintf("presence-%d", n), "ts": ts,
		"from": "system:gateway", "kind": "system/presence",
		"payload": map[string]any{"event": "join", "participant": map[string]any{"id": id, "capabilities": caps}}})
	targets := g.peers(space, id)
	if replaced != nil && g.notify {
		targets = append(targets, replaced)
	}
	g.cond.Broadcast()
	g.mu.Unlock()
	p.send(welcome)
	for _, t := range targets {
		t.send(presence)
	}
}

// leave drops a closed socket: as the real gateway does, the id goes
// whichever socket of it closed.
func (g *Gateway) leave(space, id string, p *peer) {
	if id == "" {
		return
	}
	g.mu.Lock()
	sp := g.spaces[space]
	if sp == nil || sp[id] == nil {
		g.mu.Unlock()
		return
	}
	delete(sp, id)
	delete(g.caps, id)
	ts, n := g.now()
	presence, _ := json.Marshal(map[string]any{"protocol": "mew/v0.4", "id": fmt.Sprintf("presence-%d", n), "ts": ts,
		"from": "system:gateway", "kind": "system/presence",
		"payload": map[string]any{"event": "leave", "participant": map[string]any{"id": id}}})
	targets := g.peers(space, "")
	g.cond.Broadcast()
	g.mu.Unlock()
	for _, t := range targets {
		t.send(presence)
	}
}

// peerIDs returns the participants joined to a space, sorted; g.mu held.
func (g *Gateway) peerIDs(space string) []string {
	out := make([]string, 0, len(g.spaces[space]))
	for pid := range g.spaces[space] {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// peers returns the sockets of a space but except's; g.mu held.
func (g *Gateway) peers(space, except string) []*peer {
	var out []*peer
	for pid, p := range g.spaces[space] {
		if pid != except {
			out = append(out, p)
		}
	}
	return out
}

func (p *peer) send(frame []byte) { p.sendAs(websocket.MessageText, frame) }

func (p *peer) sendAs(typ websocket.MessageType, frame []byte) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.conn.Write(ctx, typ, frame)
}

// BroadcastBinary is Broadcast as a binary message: the real gateway
// relays MEW stream data ("#<stream>#<data>") that way.
func (g *Gateway) BroadcastBinary(space string, frame []byte) {
	g.mu.Lock()
	targets := g.peers(space, "")
	g.mu.Unlock()
	for _, t := range targets {
		t.sendAs(websocket.MessageBinary, frame)
	}
}

// Broadcast sends one frame, byte for byte, to every participant of a
// space, in one loop (all see the same order), as the gateway does. A
// participant not joined (dropped, not yet reconnected) does not get it:
// the frame is lost for it.
func (g *Gateway) Broadcast(space string, frame []byte) {
	g.mu.Lock()
	targets := g.peers(space, "")
	hist := g.history
	var ids []string
	if hist != nil {
		ids = g.peerIDs(space)
	}
	g.mu.Unlock()
	if hist != nil {
		hist.log(space, frame, ids)
	}
	for _, t := range targets {
		t.send(frame)
	}
}

// Drop closes a participant's connection abruptly (no close frame), as a
// network failure or a gateway restart would.
func (g *Gateway) Drop(space, id string) bool {
	g.mu.Lock()
	p := g.spaces[space][id]
	g.mu.Unlock()
	if p == nil {
		return false
	}
	_ = p.conn.CloseNow()
	return true
}

// Pause makes the gateway refuse joins (it closes the connection) until
// Resume: a test drops a participant, broadcasts frames it must miss, then
// lets it back.
func (g *Gateway) Pause() {
	g.mu.Lock()
	g.paused = true
	g.mu.Unlock()
}

// NotifyReplaced makes a duplicate join also send its presence join to
// the socket it replaces (MEW v0.11.0 does not; a gateway that did would
// tell the bridge it was evicted at once).
func (g *Gateway) NotifyReplaced(on bool) {
	g.mu.Lock()
	g.notify = on
	g.mu.Unlock()
}

// Resume lets joins in again.
func (g *Gateway) Resume() {
	g.mu.Lock()
	g.paused = false
	g.mu.Unlock()
}

// Joins returns how many times id has joined.
func (g *Gateway) Joins(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.joins[id]
}

// WaitJoins waits until id has joined at least n times (and is joined),
// or ctx ends.
func (g *Gateway) WaitJoins(ctx context.Context, space, id string, n int) error {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.joins[id] < n || g.spaces[space][id] == nil {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mewgw: %s joined %d times, want %d: %w", id, g.joins[id], n, err)
		}
		if g.closed {
			return errors.New("mewgw: gateway closed")
		}
		g.cond.Wait()
	}
	return nil
}

// participants serves GET /participants?space=ID as the real gateway:
// {"participants":[{"id","connected","capabilities"}]}.
func (g *Gateway) participants(w http.ResponseWriter, r *http.Request) {
	space := r.URL.Query().Get("space")
	if space == "" {
		space = "default"
	}
	g.mu.Lock()
	list := []map[string]any{}
	for pid := range g.spaces[space] {
		list = append(list, map[string]any{"id": pid, "connected": true, "capabilities": g.caps[pid]})
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"participants": list})
}

// Client is a participant joined to a gateway (the test's other agents,
// or an impostor joining under the bridge's name).
type Client struct {
	Conn    *websocket.Conn
	Welcome []byte
}

// Join dials url and joins space as id with token, as MEWClient does, and
// returns once the welcome arrived.
func Join(ctx context.Context, url, space, id, token string) (*Client, error) {
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(-1)
	msg, _ := json.Marshal(map[string]any{"type": "join", "space": space, "token": token, "participantId": id, "capabilities": []any{}})
	if err := conn.Write(ctx, websocket.MessageText, msg); err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	_, w, err := conn.Read(ctx)
	if err != nil {
		_ = conn.CloseNow()
		return nil, err
	}
	c := &Client{Conn: conn, Welcome: w}
	// Keep reading (and discarding) so the gateway's writes never block.
	go func() {
		for {
			if _, _, err := conn.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	return c, nil
}

// Close closes the client's connection.
func (c *Client) Close() { _ = c.Conn.Close(websocket.StatusNormalClosure, "") }

// Listener returns a closed loopback address (for tests of an
// unreachable gateway).
func Listener() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
