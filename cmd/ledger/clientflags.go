package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/app"
)

// unreachableError: no ledger to talk to (exit status 2).
type unreachableError struct{ msg string }

func (u *unreachableError) Error() string { return u.msg }

// unreachable builds an unreachableError naming the deepest network
// error of cause (e.g. "dial tcp 127.0.0.1:8080: connect: connection
// refused").
func unreachable(what, where string, cause error) error {
	msg := fmt.Sprintf("cannot reach %s at %s: is `ledger serve` running?", what, where)
	var op *net.OpError
	if errors.As(cause, &op) {
		msg += " (" + op.Error() + ")"
	} else if cause != nil {
		msg += " (" + strings.TrimPrefix(cause.Error(), client.ErrUnreachable.Error()+": ") + ")"
	}
	return &unreachableError{msg: msg}
}

// errTimedOut: the command's --timeout ran out (exit status 1: the ledger
// was there, but did not answer in time).
var errTimedOut = errors.New("timed out")

// Output formats of the read commands.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// clientOpts are the flags every client subcommand shares.
type clientOpts struct {
	apiURL string
	token  string
	space  string
	output string
	minSeq uint64
	quiet  bool
	// timeout bounds all of the command's requests together (0: none).
	timeout  time.Duration
	deadline time.Time // set by the first client or bound call
	f        *flags
	// data is where to look for a running `ledger serve` (apiFromData);
	// apiSource says where apiURL came from, for the which-ledger line.
	data      string
	apiSource string
}

// until returns the command's deadline per --timeout (zero: none), fixed
// by its first call.
func (c *clientOpts) until() time.Time {
	if c.timeout > 0 && c.deadline.IsZero() {
		c.deadline = time.Now().Add(c.timeout)
	}
	return c.deadline
}

// bound returns ctx ended at the command's --timeout, for a command that
// loops on its own (watch reconnects); its requests have the same deadline
// from the client. timedOut tells whether that is what ended it.
func (c *clientOpts) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d := c.until(); !d.IsZero() {
		return context.WithDeadlineCause(ctx, d, errTimeout)
	}
	return context.WithCancel(ctx)
}

// timedOut returns the error of a command ended by --timeout (ctx from
// bound), or nil.
func (c *clientOpts) timedOut(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return fmt.Errorf("%w: gave up after --timeout %v", errTimedOut, c.timeout)
	}
	return nil
}

// addClientFlags registers --api, --token, --space and, for reads,
// -o/--output and --min-seq.
func addClientFlags(f *flags, c *clientOpts, read bool) {
	f.str(&c.apiURL, "api", "URL", client.DefaultAPI, "the ledger's HTTP API (default: the ledger serve running on --data, else "+client.DefaultAPI+")", true)
	f.str(&c.data, "data", "DIR", app.DefaultDataDir, "without --api or LEDGER_API, talk to the ledger serve running on this data directory (its serve.addr.json)", true)
	f.parsed = append(f.parsed, c.resolveAPI)
	f.str(&c.token, "token", "TOKEN", "", "bearer token for an API started with --auth (prefer the environment variable: a flag shows in ps)", true)
	f.hide("token")
	f.boolean(&c.quiet, "quiet", false, "do not say on stderr which ledger the command acts on", true)
	f.short("q", "quiet")
	c.f = f
	f.str(&c.space, "space", "NAME", "", "space (default: the server's default space)", true)
	if f.cmd.name != "mcp" {
		// ledger mcp is a server of many calls, each bounded by
		// --max-wait: a bound on its whole life would stop it.
		f.envDuration(&c.timeout, "timeout", "D", 0, "give up after D (e.g. 30s) for all of the command's requests together; a stream (watch) ends then (default: no bound but each request's own)")
	}
	if read {
		f.str(&c.output, "output", "table|json", outputTable, "table, or json for the API's objects exactly", true)
		f.short("o", "output")
		f.u64(&c.minSeq, "min-seq", "SEQ", 0, "wait (up to the server's bound) until the projection has applied this stream sequence", false)
	}
}

func (c *clientOpts) check() error {
	if c.output != "" && c.output != outputTable && c.output != outputJSON {
		return usageError("--output %q: want table or json", c.output)
	}
	if c.timeout < 0 {
		return usageError("--timeout %v: want a positive duration, or 0 for none", c.timeout)
	}
	return nil
}

func (c *clientOpts) client() (*client.Client, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithToken(c.token)}
	if c.timeout > 0 {
		// One deadline, fixed now, for every request the command makes
		// (a retry, a second page, a stream): the bound is the command's.
		deadline := c.until()
		opts = append(opts, client.WithHTTPClient(&http.Client{
			Timeout:   client.DefaultTimeout,
			Transport: deadlineTransport{deadline: deadline, next: cliTransport},
		}))
	}
	cl, err := client.New(c.apiURL, opts...)
	if err != nil {
		return nil, usageError("%v", err)
	}
	c.announce(cl.API(), "api")
	return cl, nil
}

// announce says on stderr which ledger the command acts on (target, the
// value of flag name), unless --quiet.
func (c *clientOpts) announce(target, name string) {
	if c.quiet {
		return
	}
	source := c.f.source(name)
	if name == "api" && c.apiSource != "" {
		source = c.apiSource
	}
	announce(c.f.stderr, target, source)
}

func (c *clientOpts) read() client.ReadOption {
	return client.ReadOptions{Space: c.space, MinSeq: c.minSeq}
}

// cliTransport is the commands' HTTP transport: the client's, which
// returns the ledger's refusal of a request whose body was still being
// sent instead of the failed write.
var cliTransport = client.NewTransport()

// deadlineTransport gives every request the same deadline: --timeout.
type deadlineTransport struct {
	deadline time.Time
	next     http.RoundTripper
}

// errTimeout is the cause of a request cut by --timeout.
var errTimeout = errors.New("--timeout reached")

func (d deadlineTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithDeadlineCause(r.Context(), d.deadline, errTimeout)
	resp, err := d.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		if errors.Is(context.Cause(ctx), errTimeout) {
			return nil, fmt.Errorf("%w (%s)", errTimeout, err)
		}
		return nil, err
	}
	// The body is read after RoundTrip returns (a stream for long): the
	// deadline holds until it is closed.
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel, ctx: ctx}
	return resp, nil
}

// cancelBody releases the request's deadline when the body is closed, and
// says a read cut by the deadline was --timeout.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	ctx    context.Context
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && errors.Is(context.Cause(b.ctx), errTimeout) {
		err = fmt.Errorf("%w (%s)", errTimeout, err)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// natsBanner starts what a NATS server says first to every connection.
const natsBanner = "INFO {"

// notHTTP says, in the CLI's words, that --api points at something that is
// not the ledger's HTTP API (nil when err is not that): the NATS port (it
// greets every connection with its INFO banner, which the HTTP client
// reports as a malformed response or an early answer), or another protocol.
// It looks at the address again to be sure: a NATS server speaks first.
func notHTTP(ctx context.Context, apiURL string, err error) error {
	var ae *api.Error
	var ops *api.Error
	if errors.As(err, &ae) || errors.As(err, &ops) || errors.Is(err, errTimeout) {
		return nil // an HTTP answer, or our own bound
	}
	msg := err.Error()
	if isNATS(ctx, apiURL) {
		return &unreachableError{msg: fmt.Sprintf("--api %s: that is a NATS server (it greets with an INFO banner), not the ledger's HTTP API; "+
			"give --api the address of `ledger serve --http` (default %s), and NATS addresses to --nats-url", apiURL, client.DefaultAPI)}
	}
	if strings.Contains(msg, "malformed HTTP") || strings.Contains(msg, "readLoopPeekFailLocked") ||
		strings.Contains(msg, "first record does not look like a TLS handshake") {
		return &unreachableError{msg: fmt.Sprintf("--api %s: what answered there does not speak HTTP as the ledger's API does", apiURL)}
	}
	return nil
}

// isNATS reports whether the host of api greets a connection with a NATS
// INFO banner (within a second).
func isNATS(ctx context.Context, apiURL string) bool {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, len(natsBanner))
	_, err = io.ReadFull(conn, buf)
	return err == nil && string(buf) == natsBanner
}

// clientError turns an error of the public client into what the
// dispatcher reports: unreachable (exit 2) with a hint, or the API's error
// (exit 1).
func clientError(apiURL string, err error) error {
	var (
		ae     *api.Error
		status int
	)
	if e := notHTTP(context.Background(), apiURL, err); e != nil {
		return e
	}
	switch {
	case errors.Is(err, errTimeout):
		return fmt.Errorf("%w: gave up after --timeout: %s", errTimedOut, strings.TrimPrefix(err.Error(), client.ErrUnreachable.Error()+": "))
	case errors.Is(err, client.ErrUnreachable):
		return unreachable("the ledger", apiURL, err)
	case errors.As(err, &ae):
		status = ae.Status
	default:
		return err
	}
	if status == http.StatusUnauthorized {
		return fmt.Errorf("%s (give the API's bearer token: LEDGER_TOKEN or --token)", err.Error())
	}
	return fmt.Errorf("%s", err.Error())
}

// positional parses flags that may come before or after positional
// arguments ("get ID -o json" and "get -o json ID") and returns the
// positionals.
func positional(f *flags, args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.parseArgs(args); err != nil {
			return nil, err
		}
		rest := f.fs.Args()
		if len(rest) == 0 {
			return pos, f.checkEnv()
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), f.checkEnv()
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
