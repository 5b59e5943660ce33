// Package logging builds the ledger's zerolog logger and names the log keys
// every package of the product layer uses.
//
// Contract: one logger is built in main (or a test) and passed down; nothing
// logs through a global. Format "console" is the human-readable writer,
// "json" one JSON object per line, and "" (auto) picks console when the
// output is a terminal and JSON otherwise (files, pipes, journald).
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// Log keys. Use these constants, never string literals, so that log
// queries keep working when code moves.
const (
	KeyComponent = "component"
	KeyHTTPAddr  = "http_addr"
	KeyNATSURL   = "nats_url"
	KeyNATSAddr  = "nats_listen"
	KeyDataDir   = "data"
	KeySpace     = "space"
	KeyEmbedded  = "embedded"
	KeyDurable   = "durable"
	KeySeq       = "seq"
	KeyStreamSeq = "stream_seq"
	KeyRoute     = "route"
	KeyMethod    = "method"
	KeyPath      = "path"
	KeyStatus    = "status"
	KeyTook      = "took"
	KeyCode      = "code"
	KeySubject   = "subject"
	KeyService   = "service"
	KeySignal    = "signal"
	KeySync      = "sync"
	KeyReplicas  = "replicas"
)

// Formats.
const (
	FormatAuto    = ""
	FormatConsole = "console"
	FormatJSON    = "json"
)

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("logging: invalid options")

// Options configures New.
type Options struct {
	// Format is FormatConsole, FormatJSON or FormatAuto (default).
	Format string
	// Level is a zerolog level name (trace, debug, info, warn, error);
	// default info.
	Level string
	// Out is where lines go; default os.Stderr.
	Out io.Writer
	// NoColor disables colours of the console writer (they are also off
	// when NO_COLOR is set in the environment).
	NoColor bool
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.Level == "" {
		o.Level = "info"
	}
	o.Format = strings.ToLower(o.Format)
	switch o.Format {
	case FormatAuto, FormatConsole, FormatJSON:
	default:
		return fmt.Errorf("%w: format %q, want console or json", ErrOptions, o.Format)
	}
	if _, err := zerolog.ParseLevel(strings.ToLower(o.Level)); err != nil {
		return fmt.Errorf("%w: level %q, want trace, debug, info, warn or error", ErrOptions, o.Level)
	}
	return nil
}

// New returns a logger with a timestamp on every line.
func New(o Options) (zerolog.Logger, error) {
	if err := o.Validate(); err != nil {
		return zerolog.Nop(), err
	}
	lvl, _ := zerolog.ParseLevel(strings.ToLower(o.Level))
	format := o.Format
	if format == FormatAuto {
		format = FormatJSON
		if IsTerminal(o.Out) {
			format = FormatConsole
		}
	}
	var w io.Writer = o.Out
	if format == FormatConsole {
		_, noColorEnv := os.LookupEnv("NO_COLOR")
		w = zerolog.ConsoleWriter{Out: o.Out, NoColor: o.NoColor || noColorEnv || !IsTerminal(o.Out), TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
