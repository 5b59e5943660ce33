// Command ledger is the proposal ledger: `ledger serve` runs it (embedded
// NATS with JetStream, projector, submit service, expirer, HTTP API), and
// the client subcommands publish envelopes and query the audit API.
//
// Exit status: 0 success; 1 the ledger answered no (a refused line, a
// proposal not found, a server error); 2 a usage error or no ledger to talk
// to. main is the only place that exits; each subcommand lives in its own
// file and returns an error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitSignals = 130
)

// env is what a subcommand gets from the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// command is one subcommand.
type command struct {
	name     string
	synopsis string // after "ledger "
	short    string // one line for `ledger --help`
	help     string // paragraph for `ledger help CMD`
	run      func(ctx context.Context, e env, args []string) error
	// ops: an operations command (contract §9), listed after the client
	// commands.
	ops bool
}

// commands is filled by each subcommand's file (init order does not
// matter: the map is read only in main).
var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// errFailed is returned by a subcommand that already printed why it
// failed (exit status 1).
var errFailed = errors.New("failed")

// defaultGCPercent is the collector's GOGC unless GOGC is set.
const defaultGCPercent = 50

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel() // first signal: graceful shutdown
		<-sigs
		fmt.Fprintln(os.Stderr, "ledger: second signal: exiting without a clean shutdown")
		os.Exit(exitSignals)
	}()
	// The process's memory policy: the collector at GOGC 50 unless GOGC
	// is set (Pebble's buffers are live heap in a pure-Go build; see the
	// README's Performance), and the Go runtime's own GOMEMLIMIT for a
	// soft limit. Set here, not in run, which tests call in-process.
	if v := os.Getenv("LEDGER_MEMORY_LIMIT"); v != "" {
		fmt.Fprintf(os.Stderr, "ledger: LEDGER_MEMORY_LIMIT is no longer read: set GOMEMLIMIT=%s instead (the Go runtime's soft memory limit, same syntax)\n", v)
		os.Exit(exitUsage)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	// net/http logs, with the standard logger, the first bytes of what a
	// non-HTTP server sent first ("Unsolicited response received on idle
	// HTTP channel starting with \"INFO {...}\""): --api at the NATS port.
	// The command says that in its own words (clientflags.go); the dump
	// is dropped.
	log.SetOutput(dropLines{w: os.Stderr, prefix: "Unsolicited response received on idle HTTP channel"})
	code := run(ctx, env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	cancel()
	os.Exit(code)
}

// dropLines writes the standard logger's lines to w but those whose
// message starts with prefix.
type dropLines struct {
	w      io.Writer
	prefix string
}

func (d dropLines) Write(p []byte) (int, error) {
	msg := string(p)
	if i := strings.Index(msg, d.prefix); i >= 0 && i < 32 { // after the date and time
		return len(p), nil
	}
	return d.w.Write(p)
}

// run dispatches to a subcommand and maps its error to an exit status.
func run(ctx context.Context, e env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		usage(e.stdout)
		return exitOK
	case "--version", "-version", "-v", "-V":
		// The habit of every CLI; the same as `ledger version` (there is
		// no top-level -v for verbose to collide with).
		name, rest = "version", nil
	case "help":
		if len(rest) == 0 {
			usage(e.stdout)
			return exitOK
		}
		if rest[0] == "help" {
			fmt.Fprint(e.stdout, "Usage: ledger help [COMMAND]\n\nShows the usage of COMMAND (the same as 'ledger COMMAND --help'), or the\nlist of commands.\n")
			return exitOK
		}
		c, ok := commands[rest[0]]
		if !ok {
			fmt.Fprintf(e.stderr, "ledger: no command %q%s\n\n", rest[0], didYouMeanCommand(rest[0]))
			usage(e.stderr)
			return exitUsage
		}
		name, rest = c.name, []string{"--help"}
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.stderr, "ledger: no command %q%s\n\n", name, didYouMeanCommand(name))
		usage(e.stderr)
		return exitUsage
	}
	err := c.run(ctx, e, rest)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFailed):
		return exitFailed
	case errors.Is(err, errUsage):
		fmt.Fprintf(e.stderr, "ledger %s: %s\nRun 'ledger help %s' for usage.\n", c.name, userMessage(strings.TrimPrefix(err.Error(), "usage: ")), c.name)
		return exitUsage
	case errors.As(err, new(*unreachableError)):
		fmt.Fprintf(e.stderr, "ledger %s: %s\n", c.name, userMessage(err.Error()))
		return exitUsage
	default:
		fmt.Fprintf(e.stderr, "ledger %s: %s\n", c.name, userMessage(err.Error()))
		return exitFailed
	}
}

// didYouMeanCommand is " (did you mean X?)" for a mistyped command, else "".
func didYouMeanCommand(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	if s := suggest(name, names); s != "" {
		return " (did you mean " + s + "?)"
	}
	return ""
}

// group orders the command list: serve, client commands, ops commands.
func group(name string) int {
	switch {
	case name == "serve":
		return 0
	case commands[name].ops:
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprint(w, `ledger: an append-only, replayable, queryable ledger of MEW protocol proposals, on NATS JetStream.

Usage: ledger COMMAND [flags]
       ledger --version

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		// serve, then the client commands, then ops, each by name
		gi, gj := group(names[i]), group(names[j])
		if gi != gj {
			return gi < gj
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].short)
	}
	fmt.Fprint(w, `
Most flags also read an environment variable: --data is LEDGER_DATA,
--nats-url is LEDGER_NATS_URL, and so on. 'ledger help COMMAND' shows them.
GOMEMLIMIT sets a soft Go memory limit (e.g. 1GiB; default off); the
collector runs at GOGC=50 unless GOGC is set. Build
with CGO_ENABLED=0, as 'make build' does: the store's memory is then on
the Go heap, under that policy.

Exit status: 0 ok, 1 refused or not found, 2 usage error or no ledger to talk to.

An explicit flag always beats its environment variable. Every command that
talks to a ledger first says on stderr which one, and where that choice came
from: "ledger: http://127.0.0.1:8080 (--api)"; -q, --quiet (env LEDGER_QUIET)
silences that line (LEDGER_QUIET=1, true or yes). -o, --output is the output
format wherever there is one. --timeout D (env LEDGER_TIMEOUT) bounds all of
a client command's requests together.
`)
}
