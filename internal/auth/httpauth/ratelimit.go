package httpauth

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mewledger/ledger/api"
	"golang.org/x/time/rate"
)

// Defaults of RateConfig.
const (
	DefaultWritesPerSecond = 50
	DefaultWriteBurst      = 100
	DefaultMaxClients      = 10_000
	// sweepEvery bounds how often idle clients are forgotten.
	sweepEvery = time.Second
)

// RateConfig is a per-client token bucket: PerSecond writes (envelopes) a second on
// average, bursts of up to Burst. The zero value means the defaults (50/s,
// burst 100); PerSecond < 0 turns the limit off.
type RateConfig struct {
	PerSecond float64 `yaml:"per_second" json:"per_second"`
	Burst     int     `yaml:"burst" json:"burst"`
	// MaxClients bounds the clients tracked at once (default 10,000).
	// Clients whose bucket is full again are forgotten, which changes
	// nothing for them; when MaxClients clients are all active, a new
	// client is refused (429) until one goes idle.
	MaxClients int `yaml:"max_clients" json:"max_clients"`
}

// Off reports whether the limit is turned off.
func (c *RateConfig) Off() bool { return c.PerSecond < 0 }

// Validate fills defaults and checks the values.
func (c *RateConfig) Validate() error {
	if c.Off() {
		return nil
	}
	if c.PerSecond == 0 {
		c.PerSecond = DefaultWritesPerSecond
		if c.Burst == 0 {
			c.Burst = DefaultWriteBurst
		}
	}
	if c.Burst == 0 {
		c.Burst = max(1, int(math.Ceil(c.PerSecond)))
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	switch {
	case math.IsNaN(c.PerSecond) || math.IsInf(c.PerSecond, 0):
		return fmt.Errorf("%w: write limit per_second must be a finite number", ErrConfig)
	case c.Burst < 1:
		return fmt.Errorf("%w: write limit burst %d, want ≥ 1", ErrConfig, c.Burst)
	case c.MaxClients < 1:
		return fmt.Errorf("%w: write limit max_clients %d, want ≥ 1", ErrConfig, c.MaxClients)
	}
	return nil
}

// Limiter rate-limits requests per client: the authenticated token's name
// when the request went through a Guard, else the remote IP (the port is
// ignored). Behind a reverse proxy every unauthenticated request has the
// proxy's address; give writers tokens.
type Limiter struct {
	cfg RateConfig
	now func() time.Time

	mu        sync.Mutex
	clients   map[string]*rate.Limiter
	lastSweep time.Time
}

// NewLimiter returns a limiter for cfg (validated here).
func NewLimiter(cfg RateConfig) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{cfg: cfg, now: time.Now, clients: map[string]*rate.Limiter{}}, nil
}

// ClientKey returns the key r is limited under: "token:<name>" for an
// authenticated request, else "ip:<remote address without port>".
func ClientKey(r *http.Request) string {
	if p, ok := FromContext(r.Context()); ok {
		return "token:" + p.Name
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// Allow takes one write of key's budget. When over the limit it returns
// false and how long until a write would be allowed.
func (l *Limiter) Allow(key string) (bool, time.Duration) { return l.AllowN(key, 1) }

// AllowN takes n writes (envelopes) of key's budget at once, or none:
// when over the limit it returns false and how long until n would be
// allowed (a second when n is over the burst: never at once). A limit
// that is off allows everything.
func (l *Limiter) AllowN(key string, n int) (bool, time.Duration) {
	if l.cfg.Off() || n <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now, false)
	lim, ok := l.clients[key]
	if !ok {
		if len(l.clients) >= l.cfg.MaxClients {
			l.sweep(now, true)
		}
		if len(l.clients) >= l.cfg.MaxClients {
			return false, time.Second
		}
		lim = rate.NewLimiter(rate.Limit(l.cfg.PerSecond), l.cfg.Burst)
		l.clients[key] = lim
	}
	res := lim.ReserveN(now, n)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep forgets clients whose bucket is full again (a fresh limiter would
// be the same), at most once a second unless forced.
func (l *Limiter) sweep(now time.Time, force bool) {
	if !force && now.Sub(l.lastSweep) < sweepEvery {
		return
	}
	l.lastSweep = now
	for k, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.cfg.Burst) {
			delete(l.clients, k)
		}
	}
}

// Clients returns the number of clients tracked (for tests and metrics).
func (l *Limiter) Clients() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// WaitN takes n writes of key's budget, waiting for them while ctx
// allows (as long as the budget needs to refill: a bulk write is slowed to
// the limit, not refused). n over the burst is taken a burst at a time.
func (l *Limiter) WaitN(ctx context.Context, key string, n int) error {
	if l.cfg.Off() {
		return nil
	}
	for n > 0 {
		k := min(n, l.cfg.Burst)
		for {
			ok, wait := l.AllowN(key, k)
			if ok {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		n -= k
	}
	return nil
}

// budgetKey is the context key of a request's write budget.
type budgetKey struct{}

type budget struct {
	l   *Limiter
	key string
}

// WaitWrites takes n more writes (envelopes) of the budget of the client
// whose request ctx belongs to, waiting while the budget refills (see
// Limiter.WaitN). A request that did not go through a Limiter's Wrap, or
// whose limit is off, has no budget: WaitWrites returns nil at once. This
// is how a request carrying many envelopes (NDJSON) pays one write per
// envelope (contract §10): Wrap took the first.
func WaitWrites(ctx context.Context, n int) error {
	b, ok := ctx.Value(budgetKey{}).(budget)
	if !ok {
		return nil
	}
	return b.l.WaitN(ctx, b.key, n)
}

// Wrap limits next per client (ClientKey): a request costs one write
// (more through WaitWrites); over the limit it answers 429 with
// Retry-After in whole seconds (at least 1). A limit that is off adds
// nothing to the request.
func (l *Limiter) Wrap(next http.Handler) http.Handler {
	if l.cfg.Off() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := ClientKey(r)
		ok, wait := l.Allow(key)
		if !ok {
			secs := max(1, int64(math.Ceil(wait.Seconds())))
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			writeError(w, http.StatusTooManyRequests, api.CodeRateLimited,
				fmt.Sprintf("write rate limit exceeded (%g/s, burst %d); retry after %ds", l.cfg.PerSecond, l.cfg.Burst, secs))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), budgetKey{}, budget{l, key})))
	})
}
