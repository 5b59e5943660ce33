package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// HandlerTransport is an http.RoundTripper that serves each request
// directly from an http.Handler, in this process: no socket, no listener,
// no connection cap of the server's. The ledger's /mcp mount uses it to
// call the API's own handler (authentication and route table included), so
// a tool call is checked exactly as the same request over the network.
//
// Contract:
//   - The handler runs on its own goroutine per request; RoundTrip returns
//     as soon as the handler has written its header (or flushed, or
//     written a first byte, or returned), so streaming answers (the watch
//     stream) are read while the handler still writes.
//   - The request's context is the handler's (the handler stops when the
//     caller cancels it), and closing the response body cancels it too and
//     waits for the handler to return: the goroutine is owned by the body.
//   - The response writer supports Flush; SetWriteDeadline and
//     SetReadDeadline answer http.ErrNotSupported (there is no connection).
//   - The Authorization header of the context (WithAuthorization) is set
//     on the request when the request carries none: the caller's own token
//     is forwarded.
//
// Safe for concurrent use.
type HandlerTransport struct {
	// Handler serves the requests. Required; a func so the transport can
	// be built before the handler it calls (the handler that mounts /mcp).
	Handler func() http.Handler
	// RemoteAddr is the RemoteAddr of the requests. Default "in-process".
	RemoteAddr string
}

type authKey struct{}

// WithAuthorization returns ctx carrying an Authorization header value for
// HandlerTransport to forward ("" carries none).
func WithAuthorization(ctx context.Context, authorization string) context.Context {
	if authorization == "" {
		return ctx
	}
	return context.WithValue(ctx, authKey{}, authorization)
}

type callerAddrKey struct{}

// WithCallerAddr returns ctx naming addr as the RemoteAddr of the requests
// HandlerTransport serves for it (default: the transport's RemoteAddr).
func WithCallerAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, callerAddrKey{}, addr)
}

// authorization returns the Authorization value ctx carries, or "".
func authorization(ctx context.Context) string {
	s, _ := ctx.Value(authKey{}).(string)
	return s
}

// RoundTrip serves req from the handler.
func (t *HandlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Handler == nil {
		return nil, errors.New("mcp: HandlerTransport without a Handler")
	}
	h := t.Handler()
	if h == nil {
		return nil, errors.New("mcp: HandlerTransport: the handler is not set yet")
	}
	ctx, cancel := context.WithCancel(req.Context())
	in := req.Clone(ctx)
	if in.Header.Get("Authorization") == "" {
		if a := authorization(req.Context()); a != "" {
			in.Header.Set("Authorization", a)
		}
	}
	in.RemoteAddr = t.RemoteAddr
	if a, _ := req.Context().Value(callerAddrKey{}).(string); a != "" {
		in.RemoteAddr = a
	}
	if in.RemoteAddr == "" {
		in.RemoteAddr = "in-process"
	}
	in.RequestURI = req.URL.RequestURI()
	in.Host = req.URL.Host
	if in.Body == nil {
		in.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				pw.CloseWithError(fmt.Errorf("mcp: handler panicked: %v", p))
				w.start()
				return
			}
			w.start() // a handler that wrote nothing answered 200
			pw.Close()
		}()
		h.ServeHTTP(w, in)
	}()
	select {
	case <-w.started:
	case <-ctx.Done():
		cancel()
		pr.Close()
		<-done
		return nil, ctx.Err()
	}
	body := &ownedBody{pr: pr, cancel: cancel, done: done}
	if err := req.Context().Err(); err != nil { // cancelled while the handler answered
		body.Close()
		return nil, err
	}
	resp := &http.Response{
		Status:     fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode: w.status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        w.snapshot,
		ContentLength: -1,
		Request:       req,
		Body:          body,
	}
	return resp, nil
}

// pipeWriter is the handler's http.ResponseWriter: the body goes into a
// pipe the response body reads.
type pipeWriter struct {
	header   http.Header
	snapshot http.Header // the header as sent
	pw       *io.PipeWriter
	once     sync.Once
	status   int
	started  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.snapshot = w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) start() { w.WriteHeader(http.StatusOK) }

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.start()
	return w.pw.Write(p)
}

// Flush starts the response (the pipe itself holds nothing back).
func (w *pipeWriter) Flush() { w.start() }

// SetWriteDeadline and SetReadDeadline: there is no connection.
func (w *pipeWriter) SetWriteDeadline(time.Time) error { return http.ErrNotSupported }
func (w *pipeWriter) SetReadDeadline(time.Time) error  { return http.ErrNotSupported }

// ownedBody is the response body: Close stops the handler and waits for it.
type ownedBody struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (b *ownedBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *ownedBody) Close() error {
	b.once.Do(func() {
		b.cancel()
		b.pr.CloseWithError(errors.New("mcp: response body closed"))
		<-b.done
	})
	return nil
}
