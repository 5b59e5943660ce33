package mewgw

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Hostile inputs a Hostile gateway can send to a joined participant.
const (
	HostileDie         = "die"          // the gateway process dies: every socket closed, no close frame
	HostileCloseNormal = "close-normal" // a close frame 1000, then the socket closed
	HostileBadOpcode   = "bad-opcode"   // a frame with a reserved opcode (0x3)
	HostilePingStorm   = "ping-storm"   // pings as fast as the socket takes them
	HostileEndless     = "endless"      // a text frame announcing 2^40 bytes, sent until the socket closes
)

// Hostile is a stand-in gateway written on raw sockets, so that it can
// send what no well-behaved WebSocket library would: it speaks the MEW
// join exchange (the join message answered by a system/welcome with
// capabilities []), answers pings, serves GET /participants, and on Do
// sends one hostile input to every joined socket. While refusing
// (Refuse), joins are answered by closing the socket. Close it when done.
type Hostile struct {
	ln    net.Listener
	space string

	mu      sync.Mutex
	conns   map[net.Conn]string // joined sockets -> participant
	refuse  bool
	closed  bool
	joins   int
	wmu     sync.Mutex // one frame written at a time (pongs, welcomes, Broadcast)
	wg      sync.WaitGroup
	joinedC *sync.Cond
}

// StartHostile starts a hostile gateway for one MEW space on a loopback
// port (addr "" ) or on addr (to come back on the same port).
func StartHostile(addr, space string) (*Hostile, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := &Hostile{ln: ln, space: space, conns: map[net.Conn]string{}}
	h.joinedC = sync.NewCond(&h.mu)
	h.wg.Add(1)
	go h.serve()
	return h, nil
}

// URL is the gateway's WebSocket URL.
func (h *Hostile) URL() string { return "ws://" + h.ln.Addr().String() }

// Addr is host:port.
func (h *Hostile) Addr() string { return h.ln.Addr().String() }

// Joins returns how many joins the gateway welcomed.
func (h *Hostile) Joins() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.joins
}

// WaitJoins waits until the gateway has welcomed n joins, or ctx ends.
func (h *Hostile) WaitJoins(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		h.joinedC.Broadcast()
		h.mu.Unlock()
	})
	defer stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.joins < n {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mewgw: %d joins, want %d: %w", h.joins, n, err)
		}
		if h.closed {
			return errors.New("mewgw: hostile gateway closed")
		}
		h.joinedC.Wait()
	}
	return nil
}

// Refuse makes the gateway close every new socket at once (on) or
// welcome joins again (off).
func (h *Hostile) Refuse(on bool) {
	h.mu.Lock()
	h.refuse = on
	h.mu.Unlock()
}

// Close closes the listener and every socket (as a killed process
// would) and waits for the gateway's goroutines.
func (h *Hostile) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for c := range h.conns {
		_ = c.Close()
	}
	h.joinedC.Broadcast()
	h.mu.Unlock()
	_ = h.ln.Close()
	h.wg.Wait()
}

// Do sends the hostile input to every joined socket and returns once it
// has begun (the ping storm and the endless frame go on in the
// background until the socket closes). HostileDie is Close.
func (h *Hostile) Do(what string) error {
	if what == HostileDie {
		h.Close()
		return nil
	}
	h.mu.Lock()
	var conns []net.Conn
	for c := range h.conns {
		conns = append(conns, c)
		delete(h.conns, c)
	}
	h.mu.Unlock()
	if len(conns) == 0 {
		return errors.New("mewgw: nobody joined")
	}
	for _, c := range conns {
		switch what {
		case HostileCloseNormal:
			_ = writeFrame(c, 0x8, []byte{0x03, 0xe8}) // 1000
			time.Sleep(10 * time.Millisecond)
			_ = c.Close()
		case HostileBadOpcode:
			_ = writeFrame(c, 0x3, []byte("?"))
		case HostilePingStorm:
			h.background(c, func() {
				for writeFrame(c, 0x9, []byte("p")) == nil {
				}
			})
		case HostileEndless:
			h.background(c, func() {
				hdr := []byte{0x81, 127, 0, 0, 0, 0, 0, 0, 0, 0}
				binary.BigEndian.PutUint64(hdr[2:], 1<<40)
				if _, err := c.Write(hdr); err != nil {
					return
				}
				chunk := []byte(strings.Repeat("x", 64<<10))
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			})
		default:
			return fmt.Errorf("mewgw: unknown hostile input %q", what)
		}
	}
	return nil
}

func (h *Hostile) background(c net.Conn, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer c.Close()
		f()
	}()
}

func (h *Hostile) serve() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = c.Close()
			return
		}
		h.wg.Add(1)
		h.mu.Unlock()
		go func() {
			defer h.wg.Done()
			h.conn(c)
		}()
	}
}

const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// conn serves one socket: an HTTP GET /participants, or a WebSocket
// upgrade followed by the join and then pings answered until the socket
// closes (or Do takes it over).
func (h *Hostile) conn(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		_ = c.Close()
		return
	}
	if req.URL.Path == "/participants" {
		h.mu.Lock()
		list := []map[string]any{}
		for _, id := range h.conns {
			list = append(list, map[string]any{"id": id, "connected": true, "capabilities": []any{}})
		}
		h.mu.Unlock()
		body, _ := json.Marshal(map[string]any{"participants": list})
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		_ = c.Close()
		return
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + wsGUID))
	fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
	h.mu.Lock()
	refuse := h.refuse
	h.mu.Unlock()
	if refuse {
		_ = c.Close()
		return
	}
	joined := false
	for {
		op, payload, err := readFrame(br)
		if err != nil {
			h.mu.Lock()
			delete(h.conns, c)
			h.mu.Unlock()
			_ = c.Close()
			return
		}
		switch {
		case op == 0x9:
			h.mu.Lock()
			_, mine := h.conns[c]
			h.mu.Unlock()
			if mine || !joined {
				h.write(c, 0xA, payload)
			}
		case op == 0x8:
			_ = c.Close()
		case op == 0x1 && !joined:
			var j struct {
				ParticipantID string `json:"participantId"`
			}
			if json.Unmarshal(payload, &j) != nil || j.ParticipantID == "" {
				continue
			}
			welcome, _ := json.Marshal(map[string]any{"protocol": "mew/v0.4", "id": fmt.Sprintf("welcome-%d", time.Now().UnixNano()),
				"from": "system:gateway", "to": []string{j.ParticipantID}, "kind": "system/welcome",
				"payload": map[string]any{"you": map[string]any{"id": j.ParticipantID, "capabilities": []any{}}, "participants": []any{}}})
			h.mu.Lock()
			h.conns[c] = j.ParticipantID
			h.joins++
			h.joinedC.Broadcast()
			h.mu.Unlock()
			joined = true
			h.write(c, 0x1, welcome)
		}
	}
}

func (h *Hostile) write(c net.Conn, op byte, p []byte) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = writeFrame(c, op, p)
}

// Broadcast sends a text frame to every joined socket.
func (h *Hostile) Broadcast(frame []byte) {
	h.mu.Lock()
	var conns []net.Conn
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		h.write(c, 0x1, frame)
	}
}

// readFrame reads one client frame (masked) and returns its opcode and
// unmasked payload.
func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 16<<20 {
		return 0, nil, errors.New("mewgw: client frame too large")
	}
	var mask [4]byte
	if hdr[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	for i := range p {
		p[i] ^= mask[i%4]
	}
	return hdr[0] & 0x0f, p, nil
}

// writeFrame writes one unmasked, final server frame.
func writeFrame(w io.Writer, op byte, p []byte) error {
	hdr := []byte{0x80 | op}
	switch {
	case len(p) < 126:
		hdr = append(hdr, byte(len(p)))
	case len(p) < 1<<16:
		hdr = append(hdr, 126, byte(len(p)>>8), byte(len(p)))
	default:
		hdr = append(hdr, 127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(p)))
	}
	_, err := w.Write(append(hdr, p...))
	return err
}
