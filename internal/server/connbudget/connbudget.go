// Package connbudget keeps the HTTP server available under cheap pressure
// (contract §10, issue 29 items 1–3): connections that never authenticated
// cannot take the slots authenticated clients need, and long-lived streams
// have caps of their own.
//
// A Budget tracks every connection of one http.Server (install Listener,
// ConnState and ConnContext). A connection is anonymous until a request on
// it authenticates (the auth middleware calls Authenticated with the
// request's context). Then:
//
//   - At most MaxConns connections are open at once (a descriptor bound).
//     When all are taken, the next Accept first closes one that is not in
//     a request, in this order: anonymous and idle after a request;
//     anonymous and silent (the server has waited SilentAfter on it for
//     nothing); anonymous, older than MinAge, its first request not
//     arrived; authenticated and idle (the oldest first within each). It
//     waits only while every connection is in a request or young.
//   - Anonymous connections are capped apart: over AnonConns in total, or
//     over AnonPerIP from one address, the oldest anonymous one (of that
//     address) that is idle, or that has sent nothing while the server
//     waited SilentAfter on it, is closed as a new one is accepted. A new
//     connection is never the one closed, so a client that sends its
//     request at once is served however many connections an attacker
//     holds. The slots between AnonConns and MaxConns are the
//     authenticated clients' reserve.
//   - With authentication, an anonymous connection idle after a request
//     is closed after AnonIdleTimeout (the server's IdleTimeout applies
//     to the others, and to every connection in open mode).
//
// Streams (Streams.Wrap) caps requests that last (/v1/watch, /mcp) per
// client and in total, apart from the connection slots: over a cap the
// request is refused 429 at once and its connection closed.
//
// Everything here is safe for concurrent use; Close of a tracked
// connection is safe twice.
package connbudget

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Options.
const (
	DefaultMaxConns        = 512
	DefaultAnonIdleTimeout = 2 * time.Second
)

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("connbudget: invalid options")

// Options configures a Budget.
type Options struct {
	// MaxConns caps the connections open at once. Default DefaultMaxConns.
	MaxConns int
	// AnonConns caps the connections that have not authenticated (all of
	// them when nothing authenticates: open mode). Default MaxConns/4 when
	// Authenticating, else MaxConns.
	AnonConns int
	// AnonPerIP caps the anonymous connections from one remote address.
	// Default AnonConns/4 when Authenticating (at least 4), else AnonConns.
	AnonPerIP int
	// AnonIdleTimeout closes an anonymous connection idle this long after
	// a request. Default DefaultAnonIdleTimeout when Authenticating, else
	// none (in open mode every connection is anonymous: the server's
	// IdleTimeout applies, and closing the oldest idle ones under pressure
	// is enough); negative: none.
	AnonIdleTimeout time.Duration
	// Authenticating says the server's middleware calls Authenticated; it
	// only sets the defaults of AnonConns and AnonPerIP.
	Authenticating bool
	// Logger receives a debug line per connection closed to make room.
	Logger zerolog.Logger
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.AnonConns == 0 {
		o.AnonConns = o.MaxConns
		if o.Authenticating {
			o.AnonConns = max(o.MaxConns/4, 1)
		}
	}
	if o.AnonPerIP == 0 {
		o.AnonPerIP = o.AnonConns
		if o.Authenticating {
			o.AnonPerIP = min(max(o.AnonConns/4, 4), o.AnonConns)
		}
	}
	if o.AnonIdleTimeout == 0 {
		o.AnonIdleTimeout = -1
		if o.Authenticating {
			o.AnonIdleTimeout = DefaultAnonIdleTimeout
		}
	}
	switch {
	case o.MaxConns < 1:
		return fmt.Errorf("%w: MaxConns %d, want ≥ 1", ErrOptions, o.MaxConns)
	case o.AnonConns < 1 || o.AnonConns > o.MaxConns:
		return fmt.Errorf("%w: AnonConns %d, want 1..MaxConns (%d)", ErrOptions, o.AnonConns, o.MaxConns)
	case o.AnonPerIP < 1 || o.AnonPerIP > o.AnonConns:
		return fmt.Errorf("%w: AnonPerIP %d, want 1..AnonConns (%d)", ErrOptions, o.AnonPerIP, o.AnonConns)
	}
	return nil
}

// Budget tracks the connections of one server. See the package
// documentation.
type Budget struct {
	opts Options
	sem  chan struct{} // one token per open connection

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	anon   int
	anonIP map[string]int
	seq    uint64

	evicted atomic.Uint64

	// Lingering close (linger.go).
	lingering atomic.Int64
	lingerWG  sync.WaitGroup
	closing   bool // guarded by mu: the listener is closed, no new linger
}

// New returns a Budget for o (validated here).
func New(o Options) (*Budget, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Budget{opts: o, sem: make(chan struct{}, o.MaxConns), conns: map[*Conn]struct{}{}, anonIP: map[string]int{}}, nil
}

// Options returns the validated options.
func (b *Budget) Options() Options { return b.opts }

// Evicted is how many connections were closed to make room so far.
func (b *Budget) Evicted() uint64 { return b.evicted.Load() }

// Stats is a snapshot of the tracked connections.
type Stats struct {
	Open, Anonymous int
}

// Stats returns the connections open now.
func (b *Budget) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{Open: len(b.conns), Anonymous: b.anon}
}

// Conn is a tracked connection.
type Conn struct {
	net.Conn
	b       *Budget
	ip      string
	seq     uint64
	once    sync.Once
	born    time.Time    // accepted at
	sent    atomic.Bool  // the client has sent something
	lastIn  atomic.Int64 // unix nanoseconds of the last read that returned data
	waiting atomic.Int64 // unix nanoseconds of the server's first read, while nothing came

	keyOnce sync.Once // localKey
	key     string

	linger        atomic.Bool // close gracefully (Linger)
	lingerStarted atomic.Bool // the graceful close has begun

	// Guarded by b.mu.
	state  http.ConnState
	authed bool
	closed bool
	idle   *time.Timer
}

// Read reads from the connection, noting that the client sent something.
func (c *Conn) Read(p []byte) (int, error) {
	if !c.sent.Load() && c.waiting.Load() == 0 {
		c.waiting.Store(time.Now().UnixNano())
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastIn.Store(time.Now().UnixNano())
		if !c.sent.Load() {
			c.sent.Store(true)
		}
	}
	return n, err
}

// Close closes the connection and frees its slot; a connection marked
// with Linger is closed gracefully (linger.go). Safe twice: closing a
// lingering connection ends its lingering at once.
func (c *Conn) Close() error {
	if c.lingerClose() {
		return nil
	}
	return c.closeNow()
}

// Listener wraps l: Accept waits for a free slot (making one by closing
// the oldest idle connection when all are taken) and returns tracked
// connections. Closing the listener ends a waiting Accept.
func (b *Budget) Listener(l net.Listener) net.Listener {
	return &listener{Listener: l, b: b, done: make(chan struct{})}
}

type listener struct {
	net.Listener
	b         *Budget
	done      chan struct{}
	closeOnce sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	for acquired := false; !acquired; {
		select {
		case l.b.sem <- struct{}{}:
			acquired = true
			continue
		default:
		}
		// All taken: close the first idle one; when none may be closed
		// yet (all in a request, or too young), wait for one to close or
		// to age.
		if l.b.evict(rankAuthed, nil, nil, "connections at the cap") {
			continue
		}
		t := time.NewTimer(SilentAfter / 2)
		select {
		case l.b.sem <- struct{}{}:
			acquired = true
		case <-t.C:
		case <-l.done:
			t.Stop()
			return nil, net.ErrClosed
		}
		t.Stop()
	}
	nc, err := l.Listener.Accept()
	if err != nil {
		<-l.b.sem
		return nil, err
	}
	return l.b.track(nc), nil
}

func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	err := l.Listener.Close()
	l.b.closeLingering()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func remoteIP(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// track registers a new connection as anonymous and enforces the
// anonymous caps on the others.
func (b *Budget) track(nc net.Conn) *Conn {
	c := &Conn{Conn: nc, b: b, ip: remoteIP(nc), state: http.StateNew, born: time.Now()}
	b.mu.Lock()
	b.seq++
	c.seq = b.seq
	b.conns[c] = struct{}{}
	b.anon++
	b.anonIP[c.ip]++
	overAll, overIP := b.anon > b.opts.AnonConns, b.anonIP[c.ip] > b.opts.AnonPerIP
	b.mu.Unlock()
	// The anonymous caps close anonymous connections only: idle ones, and
	// silent ones (a slow client's first request, arriving, is left to
	// the total cap and the header timeout).
	if overIP {
		b.evict(rankSilent, func(o *Conn) bool { return o.ip == c.ip }, c, "anonymous connections of one address at the cap")
	} else if overAll {
		b.evict(rankSilent, nil, c, "anonymous connections at the cap")
	}
	return c
}

func (b *Budget) untrack(c *Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.idle != nil {
		c.idle.Stop()
	}
	delete(b.conns, c)
	if !c.authed {
		b.dropAnon(c)
	}
}

func (b *Budget) dropAnon(c *Conn) {
	b.anon--
	if b.anonIP[c.ip]--; b.anonIP[c.ip] <= 0 {
		delete(b.anonIP, c.ip)
	}
}

// MinAge is how long a new connection is safe from being closed to make
// room: a client writes its request right after connecting, and the
// server reads it within this even when busy. Older connections that have
// not finished their first request are fair game under pressure.
const MinAge = 250 * time.Millisecond

// SilentAfter: a new connection the server has waited on this long while
// it sent nothing is silent, and may be closed to make room before
// MinAge (a client that connects writes its request at once; an attacker
// holding connections writes nothing). On a heavily loaded machine a
// client can be later than this, and its connection closed while
// connections are scarce: its request then meets a reset or EOF
// (TestInRequestHoldsDoNotLockOut's rare failures; protecting young
// connections for MinAge instead let silent floods lock the API out).
const SilentAfter = 50 * time.Millisecond

// Ranks of connections to close, first to last; those with no rank
// (rankNone: in a request, or younger than MinAge and not silent) are
// never closed.
const (
	rankLinger = iota // lingering after a refusal (linger.go)
	rankIdle          // anonymous, idle after a request
	rankSilent        // anonymous, sent nothing while the server waited SilentAfter
	rankSlow          // anonymous, older than MinAge, first request not arrived
	rankAuthed        // authenticated, idle
	rankNone
)

func rank(c *Conn, now time.Time) int {
	switch {
	case c.lingerStarted.Load() && !c.closed:
		return rankLinger
	case c.closed || c.state == http.StateActive || c.state == http.StateHijacked:
		return rankNone
	case c.authed:
		if c.state == http.StateIdle {
			return rankAuthed
		}
		return rankNone
	case c.state == http.StateIdle:
		return rankIdle
	case !c.sent.Load() && c.waiting.Load() != 0 && now.Sub(time.Unix(0, c.waiting.Load())) >= SilentAfter:
		return rankSilent
	case now.Sub(c.born) < MinAge:
		return rankNone
	default:
		return rankSlow
	}
}

// evict closes the connection to close first (see rank) whose rank is at
// most upTo and that ok accepts (nil: any), never keep. It reports
// whether it closed one.
func (b *Budget) evict(upTo int, ok func(*Conn) bool, keep *Conn, why string) bool {
	now := time.Now()
	b.mu.Lock()
	var (
		victim *Conn
		vr     = rankNone
	)
	for c := range b.conns {
		r := rank(c, now)
		if c == keep || r > upTo || (ok != nil && !ok(c)) {
			continue
		}
		if victim == nil || r < vr || (r == vr && c.seq < victim.seq) {
			victim, vr = c, r
		}
	}
	b.mu.Unlock()
	if victim == nil {
		return false
	}
	b.evicted.Add(1)
	b.opts.Logger.Debug().Str("remote", victim.ip).Int("rank", vr).Msg("connection closed to make room: " + why)
	_ = victim.Close()
	return true
}

// unwrap finds the tracked connection under c (a *tls.Conn's NetConn).
func unwrap(c net.Conn) *Conn {
	for c != nil {
		if t, ok := c.(*Conn); ok {
			return t
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// ConnState is the http.Server's ConnState hook: it follows each
// connection's state and closes an anonymous one idle for longer than
// AnonIdleTimeout.
func (b *Budget) ConnState(nc net.Conn, s http.ConnState) {
	c := unwrap(nc)
	if c == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return
	}
	c.state = s
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	if s == http.StateIdle && !c.authed && b.opts.AnonIdleTimeout > 0 {
		idleSince := time.Now().UnixNano()
		c.idle = time.AfterFunc(b.opts.AnonIdleTimeout, func() {
			b.mu.Lock()
			// Not when the next request has begun to arrive (read, but
			// not yet Active): closing then would reset it.
			still := !c.closed && c.state == http.StateIdle && !c.authed && c.lastIn.Load() < idleSince
			b.mu.Unlock()
			if still {
				_ = c.Close()
			}
		})
	}
}

type ctxKey struct{}

// ConnContext is the http.Server's ConnContext hook: it records the
// tracked connection in the context of its requests (for Authenticated).
func (b *Budget) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c := unwrap(nc); c != nil {
		return context.WithValue(ctx, ctxKey{}, c)
	}
	return ctx
}

// Authenticated marks the connection of the request whose context is ctx
// as authenticated: it leaves the anonymous budget and is kept idle for
// the server's IdleTimeout. Outside a Budget it does nothing.
func Authenticated(ctx context.Context) {
	c, ok := ctx.Value(ctxKey{}).(*Conn)
	if !ok {
		return
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.authed || c.closed {
		return
	}
	c.authed = true
	b.dropAnon(c)
}
