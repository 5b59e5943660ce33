package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"time"
)

// A refusal the client can read (issue 36 item 1). The ledger may refuse
// a request before it has read the body (401, 403, 413, 429): it answers,
// then closes the connection after reading and discarding what the client
// still sends for a short while. A client sending a larger body than that
// meets a reset; Go's transport then reports the failed write ("broken
// pipe", "connection reset by peer") and drops the answer that is already
// in the socket's receive buffer. The connections of NewTransport keep
// it: a write that fails after the server has begun to answer the request
// in hand is reported as written (what remains of the body is dropped),
// so that the transport reads and returns the answer.

// answerWait bounds how long a failed write waits for the server's answer
// to be read before it reports the failure.
const answerWait = 2 * time.Second

// NewTransport returns a clone of http.DefaultTransport whose connections
// keep the ledger's answer readable when it refuses a request while the
// body is still being sent. The default Options.HTTP uses it; give it to
// an http.Client of your own (WithHTTPClient) to keep that behaviour.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newAnswerConn(c), nil
	}
	return t
}

// answerConn is a connection of NewTransport.
type answerConn struct {
	net.Conn

	mu       sync.Mutex
	read     uint64        // bytes read so far
	start    uint64        // read when the request in hand began
	readErr  bool          // a read failed (EOF included)
	dropping bool          // a write failed after the answer began: writes are dropped
	changed  chan struct{} // closed and replaced after each read
}

func newAnswerConn(c net.Conn) *answerConn {
	return &answerConn{Conn: c, changed: make(chan struct{})}
}

// begin marks the start of a request on the connection.
func (c *answerConn) begin() {
	c.mu.Lock()
	c.start = c.read
	c.mu.Unlock()
}

func (c *answerConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read += uint64(n)
	if err != nil {
		c.readErr = true
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return n, err
}

func (c *answerConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	dropping := c.dropping
	c.mu.Unlock()
	if dropping {
		return len(p), nil
	}
	n, err := c.Conn.Write(p)
	if err == nil || !(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
		return n, err
	}
	// The server closed: has it answered this request? The answer is in
	// the receive buffer when it did; wait for the transport to read it.
	t := time.NewTimer(answerWait)
	defer t.Stop()
	for {
		c.mu.Lock()
		switch {
		case c.read > c.start:
			c.dropping = true
			c.mu.Unlock()
			return len(p), nil
		case c.readErr:
			c.mu.Unlock()
			return n, err
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return n, err
		}
	}
}

// NetConn returns the connection underneath.
func (c *answerConn) NetConn() net.Conn { return c.Conn }

// traced adds to ctx the trace that tells a connection of NewTransport
// where each request begins.
func traced(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c := info.Conn
		for c != nil {
			if ac, ok := c.(*answerConn); ok {
				ac.begin()
				return
			}
			u, ok := c.(interface{ NetConn() net.Conn })
			if !ok {
				return
			}
			c = u.NetConn()
		}
	}})
}
