package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/apiclient"
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

// Output formats of the read commands.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// clientOpts are the flags every client subcommand shares.
type clientOpts struct {
	api    string
	token  string
	space  string
	output string
	minSeq uint64
	quiet  bool
	f      *flags
}

// addClientFlags registers --api, --token, --space and, for reads,
// -o/--output and --min-seq.
func addClientFlags(f *flags, c *clientOpts, read bool) {
	f.str(&c.api, "api", "URL", client.DefaultAPI, "the ledger's HTTP API", true)
	f.str(&c.token, "token", "TOKEN", "", "bearer token for an API started with --auth (prefer the environment variable: a flag shows in ps)", true)
	f.hide("token")
	f.boolean(&c.quiet, "quiet", false, "do not say on stderr which ledger the command acts on", true)
	f.short("q", "quiet")
	c.f = f
	f.str(&c.space, "space", "NAME", "", "space (default: the server's default space)", true)
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
	return nil
}

func (c *clientOpts) client() (*client.Client, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	cl, err := client.New(c.api, client.WithToken(c.token))
	if err != nil {
		return nil, usageError("%v", err)
	}
	c.announce(cl.API(), "api")
	return cl, nil
}

// announce says on stderr which ledger the command acts on (target, the
// value of flag name), unless --quiet.
func (c *clientOpts) announce(target, name string) {
	if !c.quiet {
		announce(c.f.stderr, target, c.f.source(name))
	}
}

func (c *clientOpts) read() client.ReadOption {
	return client.ReadOptions{Space: c.space, MinSeq: c.minSeq}
}

// clientError turns an error of the public client into what the
// dispatcher reports: unreachable (exit 2) with a hint, or the API's error
// (exit 1).
func clientError(api string, err error) error {
	var (
		ae     *client.Error
		ops    *apiclient.APIError // the operations' calls (internal/lib/apiclient)
		status int
	)
	switch {
	case errors.Is(err, client.ErrUnreachable):
		return unreachable("the ledger", api, err)
	case errors.As(err, &ae):
		status = ae.Status
	case errors.As(err, &ops):
		status = ops.Status
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
		if err := f.parse(args); err != nil {
			return nil, err
		}
		rest := f.fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
