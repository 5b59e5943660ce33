package connbudget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/mewledger/ledger/api"
)

// Holds caps the requests that hold a connection while the server waits
// on the peer or on itself (issue 36 item 2): a request body being read
// (declared and not yet sent, or trickled) and the server's own waits
// (a min_seq long poll, Hold). A connection in a request is never closed
// to make room, so without these caps enough of them, from one caller,
// lock the API out for everyone. Each hold counts against its caller's
// share (the token; else, with authentication, the remote address; in
// open mode the connection) and against the total; anonymous holds have
// a total of their own, so that authenticated callers always keep
// capacity. Over a cap the request is refused at once (429
// too_many_holds, Retry-After, Connection: close) instead of waiting.

// CodeTooManyHolds is the error code of a request refused over a hold cap.
const CodeTooManyHolds = api.CodeTooManyHolds

// ErrHoldRefused is returned by Hold over a cap.
var ErrHoldRefused = errors.New("connbudget: too many requests waiting")

// HoldOptions configures Holds.
type HoldOptions struct {
	// Max caps the holds at once. Default MaxConns/2 of the budget (256).
	Max int
	// PerClient caps one caller's holds. Default Max/8, at least 2.
	PerClient int
	// Anon caps the holds of callers without a token. Default Max/4 when
	// Authenticating, else Max.
	Anon int
	// Authenticating: tokens are checked (sets the default of Anon, and
	// names anonymous callers by address instead of by connection).
	Authenticating bool
	// Client names an authenticated caller ("" when the request did not
	// authenticate).
	Client func(*http.Request) string
}

// Validate fills defaults and checks the options.
func (o *HoldOptions) Validate() error {
	if o.Max == 0 {
		o.Max = DefaultMaxConns / 2
	}
	if o.PerClient == 0 {
		o.PerClient = max(o.Max/8, 2)
	}
	if o.Anon == 0 {
		o.Anon = o.Max
		if o.Authenticating {
			o.Anon = max(o.Max/4, 1)
		}
	}
	o.PerClient, o.Anon = min(o.PerClient, o.Max), min(o.Anon, o.Max)
	if o.Max < 1 || o.PerClient < 1 || o.Anon < 1 {
		return fmt.Errorf("%w: holds: Max %d, PerClient %d, Anon %d (want ≥ 1)", ErrOptions, o.Max, o.PerClient, o.Anon)
	}
	return nil
}

// Holds counts the holds of one server. Safe for concurrent use.
type Holds struct {
	opts HoldOptions

	mu       sync.Mutex
	total    int
	anon     int
	byClient map[string]int
	refused  uint64
}

// NewHolds returns a Holds for o (validated here).
func NewHolds(o HoldOptions) (*Holds, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Holds{opts: o, byClient: map[string]int{}}, nil
}

// Options returns the validated options.
func (h *Holds) Options() HoldOptions { return h.opts }

// Open reports the holds now, in total and of client; Refused how many
// were refused so far.
func (h *Holds) Open(client string) (total, ofClient int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total, h.byClient[client]
}

// Refused is how many holds were refused over a cap so far.
func (h *Holds) Refused() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// caller names r's caller and says whether it is anonymous.
func (h *Holds) caller(r *http.Request) (string, bool) {
	if h.opts.Client != nil {
		if c := h.opts.Client(r); c != "" {
			return c, false
		}
	}
	return AnonymousClient(r, h.opts.Authenticating), true
}

// AnonymousClient names a caller without a token: its address when
// tokens are checked, its connection in open mode (every local client has
// the loopback address: one share for all of them would let one local
// program lock out the others). It names the callers of holds: a hold
// is named at once, without a look in /proc.
func AnonymousClient(r *http.Request, authenticating bool) string {
	if authenticating {
		return "ip:" + hostOf(r.RemoteAddr)
	}
	return "conn:" + r.RemoteAddr
}

// LocalProgram names a caller without a token for the long-lived shares
// (streams, MCP sessions and subscriptions): its address when tokens are
// checked; in open mode the local process that owns its connection
// ("proc:<pid>", localpeer.go), else its connection.
func LocalProgram(r *http.Request, authenticating bool) string {
	if authenticating {
		return "ip:" + hostOf(r.RemoteAddr)
	}
	return openModeClient(r)
}

func (h *Holds) acquire(client string, anon bool) (release func(), full string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.total >= h.opts.Max:
		full = fmt.Sprintf("the server's %d waiting requests are all taken", h.opts.Max)
	case anon && h.anon >= h.opts.Anon:
		full = fmt.Sprintf("the %d waiting requests open to callers without a token are all taken", h.opts.Anon)
	case h.byClient[client] >= h.opts.PerClient:
		full = fmt.Sprintf("this caller has %d requests waiting, the most one caller may", h.opts.PerClient)
	}
	if full != "" {
		h.refused++
		return nil, full
	}
	h.total++
	if anon {
		h.anon++
	}
	h.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.total--
			if anon {
				h.anon--
			}
			if h.byClient[client]--; h.byClient[client] <= 0 {
				delete(h.byClient, client)
			}
		})
	}, ""
}

type holdKey struct{}

// holdCtx names its request's caller when first asked (in open mode the
// name may need a look in /proc: only requests that hold pay for it).
type holdCtx struct {
	h      *Holds
	r      *http.Request
	once   sync.Once
	client string
	anon   bool
}

func (hc *holdCtx) who() (string, bool) {
	hc.once.Do(func() { hc.client, hc.anon = hc.h.caller(hc.r) })
	return hc.client, hc.anon
}

// Hold takes a hold for a server wait of the request whose context is
// ctx (a min_seq long poll): release it when the wait ends. Over a cap it
// returns ErrHoldRefused (wrapped, with which cap) and the request should
// be answered WriteRefusal. Outside Holds.Wrap it holds nothing.
func Hold(ctx context.Context) (release func(), err error) {
	hc, ok := ctx.Value(holdKey{}).(*holdCtx)
	if !ok {
		return func() {}, nil
	}
	client, anon := hc.who()
	release, full := hc.h.acquire(client, anon)
	if release == nil {
		return nil, fmt.Errorf("%w: %s", ErrHoldRefused, full)
	}
	return release, nil
}

// WriteRefusal answers 429 too_many_holds for err (from Hold).
func WriteRefusal(w http.ResponseWriter, err error) {
	writeTooMany(w, "1", CodeTooManyHolds, err.Error()+"; retry later")
}

func writeTooMany(w http.ResponseWriter, retryAfter, code, msg string) {
	w.Header().Set("Retry-After", retryAfter)
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
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

// Wrap counts next's requests: one that declares a body holds from its
// start until the body is read to its end (or next returns); over a cap
// it is refused 429 at once, its body unread. The request's context
// carries its caller for Hold. Put it inside the authentication
// middleware, so that the caller is the token.
func (h *Holds) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hc := &holdCtx{h: h, r: r}
		r = r.WithContext(context.WithValue(r.Context(), holdKey{}, hc))
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		release, full := h.acquire(hc.who())
		if release == nil {
			writeTooMany(w, "1", CodeTooManyHolds, "too many requests waiting for their body: "+full+"; retry later")
			return
		}
		defer release()
		r.Body = &heldBody{ReadCloser: r.Body, release: release}
		next.ServeHTTP(w, r)
	})
}

// heldBody releases its hold when read to its end.
type heldBody struct {
	io.ReadCloser
	release func()
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Caller returns the caller of the request whose context is ctx, as
// Holds.Wrap named it (false outside Holds.Wrap).
func Caller(ctx context.Context) (string, bool) {
	hc, ok := ctx.Value(holdKey{}).(*holdCtx)
	if !ok {
		return "", false
	}
	client, _ := hc.who()
	return client, true
}
