package app

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP server's defences against slow and idle clients (issue 15,
// item 6): a request's headers must arrive within ReadHeaderTimeout; its
// body must keep coming (each read waits at most BodyIdleTimeout) and be
// complete within BodyTimeout of the request's start; at most MaxConns
// connections are open at once (the others wait in the kernel's accept
// queue, which costs this process no descriptor). Authentication runs
// before any handler reads the body, so none of this waits on an
// unauthenticated body for longer than these bounds.

// Defaults of the HTTP options.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyIdleTimeout   = 15 * time.Second
	DefaultBodyTimeout       = 5 * time.Minute
	DefaultHTTPIdleTimeout   = time.Minute
	DefaultMaxConns          = 512
)

// bodyDeadlines wraps next so that every read of a request body extends
// the connection's read deadline by idle, never beyond start+total.
//
// An error answered before the body was read to its end (a 401 of the
// authentication, a 429, a 413) closes the connection: net/http would
// otherwise read up to 256 KiB of the body before sending the answer,
// waiting on a client that never sends it.
func bodyDeadlines(next http.Handler, idle, total time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			b := &deadlineBody{rc: rc, body: r.Body, idle: idle, end: time.Now().Add(total)}
			if b.extend() == nil { // else HTTP/2 or a test recorder: no deadlines to set
				r.Body = b
				w = &closeOnEarlyError{ResponseWriter: w, body: b}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// closeOnEarlyError adds Connection: close to an error answer written
// while the request body is not read to its end.
type closeOnEarlyError struct {
	http.ResponseWriter
	body *deadlineBody
}

func (c *closeOnEarlyError) WriteHeader(status int) {
	if status >= 400 && !c.body.eof.Load() {
		c.Header().Set("Connection", "close")
	}
	c.ResponseWriter.WriteHeader(status)
}

// Flush flushes the server's writer (for handlers that assert
// http.Flusher).
func (c *closeOnEarlyError) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (c *closeOnEarlyError) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type deadlineBody struct {
	rc   *http.ResponseController
	body io.ReadCloser
	idle time.Duration
	end  time.Time
	eof  atomic.Bool // read to its end
}

func (b *deadlineBody) extend() error {
	d := time.Now().Add(b.idle)
	if d.After(b.end) {
		d = b.end
	}
	return b.rc.SetReadDeadline(d)
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	_ = b.extend()
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// limitListener accepts at most n connections open at once: Accept waits
// for one to close (golang.org/x/net/netutil.LimitListener, without the
// dependency).
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	err := l.Listener.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
