package app

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
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
func bodyDeadlines(next http.Handler, idle, total time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			b := &deadlineBody{rc: rc, body: r.Body, idle: idle, end: time.Now().Add(total)}
			if b.extend() == nil { // HTTP/2 or a test recorder: no deadlines to set
				r.Body = b
			}
		}
		next.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	rc   *http.ResponseController
	body io.ReadCloser
	idle time.Duration
	end  time.Time
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
	return b.body.Read(p)
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
