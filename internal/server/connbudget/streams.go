package connbudget

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/mewledger/ledger/api"
)

// Defaults of StreamOptions.
const (
	DefaultMaxStreams       = 128
	DefaultStreamsPerClient = 16
)

// StreamOptions configures Streams.
type StreamOptions struct {
	// Max caps the streams open at once. Default DefaultMaxStreams.
	Max int
	// PerClient caps one client's streams. Default DefaultStreamsPerClient.
	PerClient int
	// Client names the client of a request: the token's name when the
	// request authenticated, else "" (LocalProgram: its remote address
	// when Authenticating, else its local program).
	Client func(*http.Request) string
	// Authenticating: tokens are checked.
	Authenticating bool
}

// Validate fills defaults and checks the options.
func (o *StreamOptions) Validate() error {
	if o.Max == 0 {
		o.Max = DefaultMaxStreams
	}
	if o.PerClient == 0 {
		o.PerClient = min(DefaultStreamsPerClient, o.Max)
	}
	if o.Max < 1 || o.PerClient < 1 || o.PerClient > o.Max {
		return fmt.Errorf("%w: streams: Max %d, PerClient %d (want 1 ≤ PerClient ≤ Max)", ErrOptions, o.Max, o.PerClient)
	}
	return nil
}

// Streams caps long-lived requests per client and in total. Safe for
// concurrent use.
type Streams struct {
	opts StreamOptions

	mu       sync.Mutex
	total    int
	byClient map[string]int
}

// NewStreams returns a Streams for o (validated here).
func NewStreams(o StreamOptions) (*Streams, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Streams{opts: o, byClient: map[string]int{}}, nil
}

// Open reports the streams open now, in total and of client.
func (s *Streams) Open(client string) (total, ofClient int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.byClient[client]
}

func (s *Streams) client(r *http.Request) string {
	if s.opts.Client != nil {
		if c := s.opts.Client(r); c != "" {
			return c
		}
	}
	return LocalProgram(r, s.opts.Authenticating)
}

// acquire takes a slot for client, or says which cap is full.
func (s *Streams) acquire(client string) (release func(), full string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.total >= s.opts.Max:
		return nil, fmt.Sprintf("the server's %d streams are all open", s.opts.Max)
	case s.byClient[client] >= s.opts.PerClient:
		return nil, fmt.Sprintf("this client has %d streams open, the most one client may", s.opts.PerClient)
	}
	s.total++
	s.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.byClient[client]--; s.byClient[client] <= 0 {
				delete(s.byClient, client)
			}
		})
	}, ""
}

// Wrap caps next's requests: each holds a slot while next serves it. Over
// a cap the request is answered 429 {"error":{"code":"too_many_streams"}}
// with Retry-After and Connection: close, without calling next. Put it
// inside the authentication middleware, so that the client is the token.
func (s *Streams) Wrap(next http.Handler) http.Handler {
	return s.WrapIf(next, nil)
}

// WrapIf is Wrap for the requests is accepts (all when is is nil); the
// others go to next uncounted.
func (s *Streams) WrapIf(next http.Handler, is func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if is != nil && !is(r) {
			next.ServeHTTP(w, r)
			return
		}
		release, full := s.acquire(s.client(r))
		if release == nil {
			writeTooMany(w, "5", api.CodeTooManyStreams, "too many streams: "+full+"; close one or retry later")
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
