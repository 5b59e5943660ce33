package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// envPrefix prefixes the environment variable of every flag.
const envPrefix = "LEDGER_"

// envName is the variable of a flag: LEDGER_ + UPPER_SNAKE of its name.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// errUsage marks errors that are the caller's (exit status 2).
var errUsage = errors.New("usage")

// usageError wraps a message as a usage error.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// flags is the one flag layer of every subcommand: a stdlib flag set
// (so -name and --name, -name=value and -name value all work) whose flags
// may default to their environment variable LEDGER_<NAME>, with a
// placeholder, a one-letter alias and a secret mark for usage, and source
// to say where a value came from. An explicit flag always beats its
// environment variable, which beats the built-in default; an environment
// value that does not parse is a usage error naming the variable.
//
// Flags that read no variable (a file, a sequence, an alias) say so by
// env=false: a variable per flag of every set would make LEDGER_FILE or
// LEDGER_O change a command behind the user's back.
type flags struct {
	fs     *flag.FlagSet
	cmd    *command
	env    map[string]string // flag name -> env var (flags that read one)
	meta   map[string]string // flag name -> placeholder (DIR, ADDR, ...)
	alias  map[string]string // short name -> long name
	secret map[string]bool   // flags whose value usage must not print
	// envErrs: environment values that do not parse, by flag name; parse
	// reports those of the flags not given on the command line.
	envErrs map[string]error
	stdout  io.Writer
	stderr  io.Writer
	// parsed runs after a successful parse, in order (a flag group that
	// settles what its flags mean together: the client's API).
	parsed []func() error
}

// newFlags returns the flag set of cmd. Parse errors are returned, not
// printed (the dispatcher prints them); --help prints the usage on stdout.
func newFlags(cmd *command, e env) *flags {
	f := &flags{
		fs:      flag.NewFlagSet("ledger "+cmd.name, flag.ContinueOnError),
		cmd:     cmd,
		env:     map[string]string{},
		meta:    map[string]string{},
		alias:   map[string]string{},
		secret:  map[string]bool{},
		envErrs: map[string]error{},
		stdout:  e.stdout,
		stderr:  e.stderr,
	}
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	return f
}

// lookup returns the environment default of a flag that reads one.
func (f *flags) lookup(name string, env bool) (string, bool) {
	if !env {
		return "", false
	}
	f.env[name] = envName(name)
	v, ok := os.LookupEnv(envName(name))
	return v, ok && v != ""
}

func (f *flags) envErr(name, v string, err error) {
	f.envErrs[name] = usageError("%s=%q: %v", envName(name), v, err)
}

// str registers a string flag; env says whether it reads LEDGER_<NAME>.
func (f *flags) str(p *string, name, meta, def, usage string, env bool) {
	if v, ok := f.lookup(name, env); ok {
		def = v
	}
	f.meta[name] = meta
	f.fs.StringVar(p, name, def, usage)
}

func (f *flags) integer(p *int, name, meta string, def int, usage string, env bool) {
	if v, ok := f.lookup(name, env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.envErr(name, v, err)
		} else {
			def = n
		}
	}
	f.meta[name] = meta
	f.fs.IntVar(p, name, def, usage)
}

func (f *flags) u64(p *uint64, name, meta string, def uint64, usage string, env bool) {
	if v, ok := f.lookup(name, env); ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			f.envErr(name, v, err)
		} else {
			def = n
		}
	}
	f.meta[name] = meta
	f.fs.Uint64Var(p, name, def, usage)
}

func (f *flags) float(p *float64, name, meta string, def float64, usage string, env bool) {
	if v, ok := f.lookup(name, env); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.envErr(name, v, err)
		} else {
			def = n
		}
	}
	f.meta[name] = meta
	f.fs.Float64Var(p, name, def, usage)
}

func (f *flags) boolean(p *bool, name string, def bool, usage string, env bool) {
	if v, ok := f.lookup(name, env); ok {
		b, err := parseBool(v)
		if err != nil {
			f.envErr(name, v, err)
		} else {
			def = b
		}
	}
	f.fs.BoolVar(p, name, def, usage)
}

// envDuration registers a duration flag that reads LEDGER_<NAME>.
func (f *flags) envDuration(p *time.Duration, name, meta string, def time.Duration, usage string) {
	if v, ok := f.lookup(name, true); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.envErr(name, v, errors.New("want a duration such as 30s"))
		} else {
			def = d
		}
	}
	f.duration(p, name, meta, def, usage)
}

// hide marks a registered flag as secret: usage says whether it is set,
// never its value (a token from the environment).
func (f *flags) hide(name string) { f.secret[name] = true }

// short registers a one-letter alias of a registered flag.
func (f *flags) short(letter, long string) {
	fl := f.fs.Lookup(long)
	f.fs.Var(fl.Value, letter, "alias of --"+long)
	f.alias[letter] = long
}

// parse parses args; --help is flag.ErrHelp, anything else a usage error.
// An environment value that does not parse is a usage error naming the
// variable, unless the flag was given on the command line (which beats
// the variable, bad or not).
//
// Flags may come before or after positional arguments, for every command
// ("events 8 -q" as "events -q 8"; "--" ends the flags): the positionals
// are then the flag set's arguments (f.fs.Args()).
func (f *flags) parse(args []string) error {
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	// The flag set's arguments become the positionals alone ("--" keeps
	// one that starts with a dash from being read as a flag).
	if err := f.fs.Parse(append([]string{"--"}, pos...)); err != nil {
		return fmt.Errorf("%w: %s", errUsage, f.reword(err))
	}
	return f.runParsed()
}

// runParsed runs the parsed hooks.
func (f *flags) runParsed() error {
	for _, h := range f.parsed {
		if err := h(); err != nil {
			return err
		}
	}
	return nil
}

// parseLeading parses the flags before the first positional argument and
// leaves the rest, flags included, as the flag set's arguments: for `ledger
// at`, whose first positional starts a query with flags of its own.
func (f *flags) parseLeading(args []string) error {
	if err := f.parseArgs(args); err != nil {
		return err
	}
	if err := f.checkEnv(); err != nil {
		return err
	}
	return f.runParsed()
}

// parseArgs parses args without checking the environment values (see
// checkEnv): positional calls it once per run of flags.
func (f *flags) parseArgs(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.usage(f.stdout)
			return err
		}
		return fmt.Errorf("%w: %s", errUsage, f.reword(err))
	}
	return nil
}

// checkEnv reports the environment values that do not parse, of the flags
// not given on the command line.
func (f *flags) checkEnv() error {
	var errs []error
	f.fs.VisitAll(func(fl *flag.Flag) { // by name: a stable order
		if err, ok := f.envErrs[fl.Name]; ok && !f.given(fl.Name) {
			errs = append(errs, err)
		}
	})
	return errors.Join(errs...)
}

// parseBool is strconv.ParseBool plus the words people write in an
// environment file: yes/no, y/n, on/off (any case). LEDGER_QUIET=yes is
// as good as LEDGER_QUIET=1.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "y", "on":
		return true, nil
	case "no", "n", "off":
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, errors.New("want 1/0, true/false, yes/no or on/off")
	}
	return b, nil
}

// The standard library's flag errors, reworded by reword.
var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	needsArgument = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	invalidValue  = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]*): (.*)$`)
)

// reword says a flag parse error of the standard library in the CLI's own
// words, with the flags' one spelling (--name): "unknown flag --bogus"
// instead of "flag provided but not defined: -bogus".
func (f *flags) reword(err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		var names []string
		f.fs.VisitAll(func(fl *flag.Flag) {
			if len(fl.Name) > 1 { // the long names: a one-letter alias is no suggestion
				names = append(names, fl.Name)
			}
		})
		if s := suggest(m[1], names); s != "" {
			return fmt.Sprintf("unknown flag %s (did you mean --%s?)", f.spell(m[1]), s)
		}
		return fmt.Sprintf("unknown flag %s", f.spell(m[1]))
	}
	if m := needsArgument.FindStringSubmatch(msg); m != nil {
		meta := f.meta[m[1]]
		if l, ok := f.alias[m[1]]; ok {
			meta = f.meta[l]
		}
		if meta == "" {
			meta = "a value"
		}
		return fmt.Sprintf("%s needs a value (%s)", f.spell(m[1]), meta)
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		reason := m[3]
		switch {
		case strings.HasPrefix(reason, "parse error") || strings.HasPrefix(reason, "strconv."):
			reason = "not a valid " + f.kind(m[2])
		case strings.HasPrefix(reason, "time: "): // time.ParseDuration's, which names the value again
			reason = "want a duration such as 30s"
		}
		return fmt.Sprintf("%s %q: %s", f.spell(m[2]), m[1], reason)
	}
	return msg
}

// spell writes a flag name as the help does: -o for a one-letter alias,
// --name for the rest.
func (f *flags) spell(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// kind names what a flag's value must be, for an error.
func (f *flags) kind(name string) string {
	fl := f.fs.Lookup(name)
	if fl == nil {
		return "value"
	}
	switch fl.Value.(type) {
	case interface{ IsBoolFlag() bool }:
		return "boolean (true or false)"
	}
	switch fl.DefValue {
	case "0":
		return "number"
	}
	return "value"
}

// parseNone parses args and refuses positional arguments: for commands
// that take flags only.
func (f *flags) parseNone(args []string) error {
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected argument %q", f.fs.Arg(0))
	}
	return nil
}

// given reports whether flag name (or its short alias) was on the
// command line. Call it after parse.
func (f *flags) given(name string) bool {
	given := false
	f.fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name || f.alias[fl.Name] == name })
	return given
}

// usage prints the command's synopsis and its flags with their
// environment variables and defaults.
func (f *flags) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: ledger %s\n\n%s\n", f.cmd.synopsis, f.cmd.help)
	var lines []string
	shortOf := map[string]string{}
	for s, l := range f.alias {
		shortOf[l] = s
	}
	f.fs.VisitAll(func(fl *flag.Flag) {
		if _, isAlias := f.alias[fl.Name]; isAlias {
			return
		}
		name := "--" + fl.Name
		if s, ok := shortOf[fl.Name]; ok {
			name = "-" + s + ", " + name
		}
		if m := f.meta[fl.Name]; m != "" {
			name += " " + m
		}
		var notes []string
		if e, ok := f.env[fl.Name]; ok {
			notes = append(notes, "env "+e)
		}
		switch {
		case f.secret[fl.Name] && fl.DefValue != "":
			notes = append(notes, "set")
		case fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0":
			notes = append(notes, "default "+fl.DefValue)
		}
		line := "  " + name + "\n      " + fl.Usage
		if len(notes) > 0 {
			line += " (" + strings.Join(notes, "; ") + ")"
		}
		lines = append(lines, line)
	})
	if len(lines) > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s\n", strings.Join(lines, "\n"))
	}
}

// source says where a flag's value came from: "--name" when given on the
// command line, its environment variable when set there, else "default".
// Call it after parse.
func (f *flags) source(name string) string {
	if f.given(name) {
		return "--" + name
	}
	if e, ok := f.env[name]; ok && os.Getenv(e) != "" {
		return e
	}
	return "default"
}

// announce prints on stderr the one line that says which ledger a command
// acts on, and where that choice came from: "ledger: URL (--api)". stdout
// stays the command's machine-readable output.
func announce(w io.Writer, target, source string) {
	if w != nil {
		fmt.Fprintf(w, "ledger: %s (%s)\n", target, source)
	}
}

// parseSync parses --sync-interval: "always" (or "") is 0, else a
// positive duration.
func parseSync(s string) (time.Duration, error) {
	if s == "" || strings.EqualFold(s, "always") {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, usageError("--sync-interval %q: want \"always\" or a positive duration such as 1s", s)
	}
	return d, nil
}
