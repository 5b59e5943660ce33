package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mewledger/ledger/api"
)

// Sessions belong to their caller (issue 36 item 3). The SDK serves any
// request naming a session it holds, whoever sends it; HTTPHandler keeps
// which caller created each session (the token, as named by
// HTTPOptions.Caller) and answers a request naming a session that is not
// the caller's — another caller's, or one it never issued — 404 with
// nothing changed, as the MCP specification asks for an unknown session.
// Sessions are capped per caller and in total (429 too_many_sessions),
// and a session idle for the session timeout is forgotten (the SDK closes
// it at the same time).

// Defaults of HTTPOptions.
const (
	DefaultMaxSessions          = 1024
	DefaultMaxSessionsPerCaller = 64
)

const sessionHeader = "Mcp-Session-Id"

// HTTPOptions configures NewHTTPHandler.
type HTTPOptions struct {
	// SessionTimeout closes a session idle this long. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxSessions caps the sessions open at once, MaxSessionsPerCaller
	// one caller's. Defaults DefaultMaxSessions and
	// DefaultMaxSessionsPerCaller.
	MaxSessions          int
	MaxSessionsPerCaller int
	// Caller names the caller of a request (a token's name; in open mode
	// its address). nil: every caller is one.
	Caller func(*http.Request) string
	// Share names the share of the session caps a request's new session
	// counts against (in open mode: the local process, so that one local
	// program cannot take every local caller's sessions). nil: Caller.
	Share func(*http.Request) string
}

type sessionEntry struct {
	caller  string    // owner
	share   string    // counted against
	active  int       // requests in hand
	lastUse time.Time // end of the last request
}

type sessionTable struct {
	opts HTTPOptions

	mu       sync.Mutex
	byID     map[string]*sessionEntry
	byCaller map[string]int // sessions and reservations, by share
	total    int
}

func newSessionTable(o HTTPOptions) *sessionTable {
	return &sessionTable{opts: o, byID: map[string]*sessionEntry{}, byCaller: map[string]int{}}
}

// pruneLocked forgets sessions idle longer than the timeout.
func (t *sessionTable) pruneLocked(now time.Time) {
	for id, e := range t.byID {
		if e.active == 0 && now.Sub(e.lastUse) > t.opts.SessionTimeout {
			t.dropLocked(id, e)
		}
	}
}

func (t *sessionTable) dropLocked(id string, e *sessionEntry) {
	delete(t.byID, id)
	t.total--
	if t.byCaller[e.share]--; t.byCaller[e.share] <= 0 {
		delete(t.byCaller, e.share)
	}
}

// reserve takes a slot for a new session of caller, or says which cap is
// full.
func (t *sessionTable) reserve(caller string) (unreserve func(), full string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(time.Now())
	switch {
	case t.total >= t.opts.MaxSessions:
		return nil, fmt.Sprintf("the server holds %d MCP sessions, its maximum", t.opts.MaxSessions)
	case t.byCaller[caller] >= t.opts.MaxSessionsPerCaller:
		return nil, fmt.Sprintf("this caller holds %d MCP sessions, the most one caller may; end one (DELETE) or let it expire", t.opts.MaxSessionsPerCaller)
	}
	t.total++
	t.byCaller[caller]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.total--
			if t.byCaller[caller]--; t.byCaller[caller] <= 0 {
				delete(t.byCaller, caller)
			}
		})
	}, ""
}

// shareOf names the share of the session id's caps: its token when it
// has one (the caller then is the token), else the share it was counted
// against (in open mode the local program); "" when unknown.
func (t *sessionTable) shareOf(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byID[id]; e != nil {
		return e.share
	}
	return ""
}

// Sessions reports the sessions open, in total and of the share caller
// (HTTPOptions.Share; the caller itself without).
func (h *HTTPHandler) Sessions(caller string) (total, ofCaller int) {
	t := h.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(time.Now())
	return len(t.byID), t.byCaller[caller]
}

func (h *HTTPHandler) caller(r *http.Request) string {
	if h.sessions.opts.Caller != nil {
		return h.sessions.opts.Caller(r)
	}
	return ""
}

// serveOwned checks r's session against its caller and serves it.
func (h *HTTPHandler) serveOwned(w http.ResponseWriter, r *http.Request) {
	t := h.sessions
	caller := h.caller(r)
	id := r.Header.Get(sessionHeader)
	if id == "" {
		if r.Method != http.MethodPost {
			h.h.ServeHTTP(w, r) // the SDK's 400
			return
		}
		share := caller
		if t.opts.Share != nil {
			share = t.opts.Share(r)
		}
		unreserve, full := t.reserve(share)
		if unreserve == nil {
			writeErr(w, http.StatusTooManyRequests, api.CodeTooManySessions, full)
			return
		}
		// The session is the caller's as soon as its id is sent: the
		// client may use it before this answer's stream ends.
		var registered atomic.Bool
		cw := &sessionCapture{ResponseWriter: w, onSession: func(id string) {
			t.mu.Lock()
			defer t.mu.Unlock()
			if _, dup := t.byID[id]; !dup {
				t.byID[id] = &sessionEntry{caller: caller, share: share, lastUse: time.Now()}
				registered.Store(true)
			}
		}}
		h.h.ServeHTTP(cw, r)
		if !registered.Load() {
			unreserve()
		}
		return
	}
	t.mu.Lock()
	e := t.byID[id]
	if e == nil || e.caller != caller {
		t.mu.Unlock()
		writeErr(w, http.StatusNotFound, api.CodeSessionNotFound, "no MCP session with this id belongs to the caller; start one with initialize")
		return
	}
	e.active++
	t.mu.Unlock()
	cw := &sessionCapture{ResponseWriter: w}
	h.h.ServeHTTP(cw, r)
	t.mu.Lock()
	e.active--
	e.lastUse = time.Now()
	if r.Method == http.MethodDelete && cw.status/100 == 2 || cw.status == http.StatusNotFound {
		if t.byID[id] == e {
			t.dropLocked(id, e)
		}
	}
	t.mu.Unlock()
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "5")
	}
	w.WriteHeader(status)
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	b.Error.Code, b.Error.Message = code, msg
	_ = json.NewEncoder(w).Encode(b)
}

// sessionCapture records the status and the session id of an answer.
type sessionCapture struct {
	http.ResponseWriter
	status    int
	id        string
	onSession func(id string) // called with a session id sent in a 2xx answer, before it is sent
}

func (c *sessionCapture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
		c.id = c.Header().Get(sessionHeader)
		if c.id != "" && status/100 == 2 && c.onSession != nil {
			c.onSession(c.id)
		}
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *sessionCapture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(p)
}

// Flush flushes the server's writer (the SDK streams events).
func (c *sessionCapture) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (c *sessionCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }
