// Package origin keeps browsers from using the ledger's HTTP API on a
// user's behalf (contract §10, issue 29 item 4). Open mode trusts whoever can
// reach the loopback address; a web page in a browser on the same machine
// can reach it too, so the Guard refuses what only a browser would send:
//
//   - a Host that is not the listen address, a loopback name or a
//     configured name: 421 bad_host (a page on evil.example whose name
//     was rebound to 127.0.0.1 sends Host: evil.example — DNS rebinding);
//   - a state-changing request (any method but GET, HEAD, OPTIONS) that a
//     browser marks cross-site or same-site (Sec-Fetch-Site), or whose
//     Origin is not the request's own scheme://Host: 403 cross_origin
//     (cross-site request forgery: a form or a no-cors fetch);
//   - a state-changing request with a body whose Content-Type is not
//     application/json or application/x-ndjson: 415 unsupported_media_type
//     (the types a page can send without a CORS preflight are
//     text/plain, form-urlencoded and multipart; the API answers no
//     preflight, so a page cannot send JSON).
//
// Requests without Origin or Sec-Fetch-Site (curl, the CLI, agents) are
// not browsers' and pass the second check; the console's own requests are
// same-origin and pass it too. Safe for concurrent use.
package origin

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mewledger/ledger/api"
)

// The refusals' codes are api.CodeBadHost, api.CodeCrossOrigin and
// api.CodeUnsupportedMedia.
const (
	AnyHost = "*" // as a Hosts entry: accept every Host (behind a proxy that checks it)
	maxEcho = 64
)

// DefaultBodyTypes are the media types of Options.BodyTypes' default:
// JSON, and the NDJSON names the API reads (package api).
var DefaultBodyTypes = []string{"application/json", "application/x-ndjson",
	"application/ndjson", "application/jsonl", "application/x-jsonl", "application/json-lines"}

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("origin: invalid options")

// Options configures a Guard.
type Options struct {
	// ListenAddr is the server's listen address (host:port); its host is
	// accepted as a Host.
	ListenAddr string
	// Hosts are more names (or IP addresses) clients use to reach the
	// server (the --http-host flag), without port; "*" accepts any Host.
	Hosts []string
	// BodyTypes are the media types a state-changing body may have.
	// Default application/json and the NDJSON types.
	BodyTypes []string
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if len(o.BodyTypes) == 0 {
		o.BodyTypes = slices.Clone(DefaultBodyTypes)
	}
	for i, h := range o.Hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || strings.ContainsAny(h, "/ \t@") {
			return fmt.Errorf("%w: host %q: want a name or an IP address (no scheme, port or path), or %q", ErrOptions, o.Hosts[i], AnyHost)
		}
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		o.Hosts[i] = strings.Trim(h, "[]")
	}
	return nil
}

// Guard is the middleware.
type Guard struct {
	opts       Options
	anyHost    bool
	listenHost string
	listenAll  bool // listening on every address: any IP literal is ours
}

// New returns a Guard for o (validated here).
func New(o Options) (*Guard, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{opts: o, anyHost: slices.Contains(o.Hosts, AnyHost)}
	if h, _, err := net.SplitHostPort(o.ListenAddr); err == nil {
		g.listenHost = strings.ToLower(strings.Trim(h, "[]"))
		ip := net.ParseIP(g.listenHost)
		g.listenAll = g.listenHost == "" || (ip != nil && ip.IsUnspecified())
	}
	return g, nil
}

// HostAllowed reports whether a request's Host header value names this
// server: empty (HTTP/1.0), the listen host, a loopback name or address,
// a configured name, or — when the server listens on every address — any
// IP address.
func (g *Guard) HostAllowed(hostport string) bool {
	if g.anyHost || hostport == "" {
		return true
	}
	h := strings.ToLower(hostport)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == g.listenHost || slices.Contains(g.opts.Hosts, h) {
		return true
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback() || g.listenAll
	}
	return false
}

// safe methods change nothing.
func safe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// Wrap refuses a foreign Host and a cross-site state-changing request
// (see the package documentation) and passes the rest to next. Put it
// outside everything else.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.HostAllowed(r.Host) {
			refuse(w, http.StatusMisdirectedRequest, api.CodeBadHost, "Host",
				fmt.Sprintf("Host %q is not a name of this server (a page whose name was rebound to this address?); start the server with --http-host NAME to accept it", echo(r.Host)))
			return
		}
		if !safe(r.Method) {
			if field, why := crossSite(r); why != "" {
				refuse(w, http.StatusForbidden, api.CodeCrossOrigin, field, why+": a browser page may not change the ledger")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// WrapBody refuses a state-changing request whose body is not of
// Options.BodyTypes (415) and passes the rest to next. It is apart from
// Wrap so that it can go inside the authentication: a client without the
// right token hears 401/403 first.
func (g *Guard) WrapBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safe(r.Method) && hasBody(r) {
			ct := r.Header.Get("Content-Type")
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || !slices.Contains(g.opts.BodyTypes, mt) {
				refuse(w, http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia, "Content-Type",
					fmt.Sprintf("Content-Type %q: a body must be %s", echo(ct), strings.Join(g.opts.BodyTypes, ", ")))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// crossSite returns the header and the reason when r comes from another
// site's page.
func crossSite(r *http.Request) (field, why string) {
	switch s := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); s {
	case "cross-site", "same-site":
		return "Sec-Fetch-Site", fmt.Sprintf("the request comes from a %s page", s)
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return "", ""
	}
	u, err := url.Parse(o)
	if o == "null" || err != nil || u.Host == "" {
		return "Origin", fmt.Sprintf("the request comes from an opaque origin %q", echo(o))
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !strings.EqualFold(u.Scheme, scheme) || !strings.EqualFold(u.Host, r.Host) {
		return "Origin", fmt.Sprintf("the request comes from %q, not this server's origin", echo(o))
	}
	return "", ""
}

func echo(s string) string {
	if len(s) > maxEcho {
		return s[:maxEcho] + "…"
	}
	return s
}

func refuse(w http.ResponseWriter, status int, code, field, msg string) {
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	b.Error.Code, b.Error.Message, b.Error.Field = code, msg, field
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}
