package app

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mewledger/ledger/internal/server/connbudget"
)

// The HTTP server's defences against slow and idle clients (issue 15,
// item 6): a request's headers must arrive within ReadHeaderTimeout; its
// body must keep coming (each read waits at most BodyIdleTimeout) and be
// complete within BodyTimeout of the request's start. Authentication runs
// before any handler reads the body, so none of this waits on an
// unauthenticated body for longer than these bounds. The connection
// budget (package connbudget: MaxConns, anonymous connections, streams)
// is wired in app.go.

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
// authentication, a 403, 413, 415, 429) closes the connection at once:
// Connection: close on the answer, and a read deadline in the past once
// the handler returns, so that net/http does not first try to drain up to
// 256 KiB of the body from a client that may never send it (issue 29,
// item 2). That close lingers (connbudget.Linger): the server reads and
// discards what the client still sends, for a bounded time and number of
// bytes, so that a client still writing its body reads the refusal
// instead of a broken pipe (issue 36 item 1).
func bodyDeadlines(next http.Handler, idle, total time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			b := &deadlineBody{rc: rc, body: r.Body, idle: idle, end: time.Now().Add(total)}
			if b.extend() == nil { // else HTTP/2 or a test recorder: no deadlines to set
				r.Body = b
				cw := &closeOnEarlyError{ResponseWriter: w, body: b}
				next.ServeHTTP(cw, r)
				if !b.eof.Load() {
					// Closed gracefully: the client still sending its
					// body reads the answer instead of a reset
					// (connbudget.Linger, issue 36 item 1).
					connbudget.Linger(r.Context())
				}
				if cw.closing || !b.eof.Load() {
					// net/http drains up to 256 KiB of the unread body
					// before it closes (body.Close), waiting on a client
					// that may never send it: a read deadline in the past
					// ends that wait at once. The answer is flushed
					// before the drain, so the client has it.
					_ = rc.SetReadDeadline(time.Now())
				}
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// closeOnEarlyError adds Connection: close to an error answer written
// while the request body is not read to its end.
type closeOnEarlyError struct {
	http.ResponseWriter
	body    *deadlineBody
	closing bool // the answer closes the connection before the body's end
}

func (c *closeOnEarlyError) WriteHeader(status int) {
	if status >= 400 && !c.body.eof.Load() {
		c.Header().Set("Connection", "close")
		c.closing = true
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
