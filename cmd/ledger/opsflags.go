package main

// Shared plumbing of the ops subcommands (export, import, verify, replay,
// at, rebuild): their common flags (on flags, as every subcommand's), the
// logger, and reaching the ledger's NATS server.
//
// rebuild and verify also run online, through a running ledger's API
// (apiTarget): POST /v1/ops/rebuild and /v1/ops/verify.
//
// Where the NATS server is, in order:
//  1. --nats-url (LEDGER_NATS_URL): an existing server or cluster;
//  2. <data>/serve.addr.json: a running `ledger serve`, its embedded server;
//  3. <data>/nats: the embedded server's store of a stopped `ledger serve`,
//     which the command starts itself (loopback, random port, in-process
//     connection) and stops when done.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/lib/datalock"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/lib/progress"
	"github.com/mewledger/ledger/internal/server/app"
)

// opsFlags are the flags every ops subcommand takes, on the command's
// flags (the one flag layer of every subcommand).
type opsFlags struct {
	data      string
	natsURL   string
	natsConf  string
	logFormat string
	logLevel  string
	progress  string
	creds     natsCreds
	// api and token: the online operations' API (registerAPI).
	apiURL, token string
	f             *flags
	// quiet: do not say on stderr which ledger the command acts on; stderr
	// is where it is said, once (announced).
	quiet     bool
	announced bool
	// lock holds <data> while the command works on it offline (lockData);
	// locks counts the holds (released at zero).
	lock  *datalock.Lock
	locks int
}

// lockData takes <data>'s lock (datalock) before an offline command
// touches anything in it: a `ledger serve` or another offline command
// on the same directory makes it fail at once, naming the holder's pid.
// Each call must be matched by unlockData.
func (o *opsFlags) lockData() error {
	if o.locks == 0 {
		l, err := datalock.Acquire(o.data)
		if err != nil {
			return err
		}
		o.lock = l
	}
	o.locks++
	return nil
}

// unlockData undoes one lockData; the last releases the lock.
func (o *opsFlags) unlockData() {
	if o.locks == 0 {
		return
	}
	if o.locks--; o.locks == 0 {
		_ = o.lock.Release()
		o.lock = nil
	}
}

// register adds the common flags to f; f's stderr is where the command
// says which ledger it acts on.
func (o *opsFlags) register(f *flags) {
	o.f = f
	f.boolean(&o.quiet, "quiet", false, "do not say on stderr which ledger the command acts on", true)
	f.short("q", "quiet")
	f.str(&o.data, "data", "DIR", app.DefaultDataDir, "ledger data directory", true)
	f.str(&o.natsURL, "nats-url", "URL", "", "NATS server URL(s), comma-separated; default: the ledger of --data", true)
	f.str(&o.natsConf, "nats-config", "FILE", "", "nats-server configuration file for the embedded server started on <data>/nats, the same as ledger serve's", true)
	f.str(&o.logFormat, "log-format", "FORMAT", "", "log format: console or json", true)
	f.str(&o.logLevel, "log-level", "LEVEL", "info", "log level", true)
	f.str(&o.progress, "progress", "MODE", "auto", "progress: auto (bar on a terminal, log lines otherwise), bar, log or off", true)
	o.creds.register(f)
}

// registerAPI adds --api and --token (rebuild and verify run online
// through the API).
func (o *opsFlags) registerAPI(f *flags) {
	f.str(&o.apiURL, "api", "URL", "", "run online through this ledger's HTTP API, e.g. "+client.DefaultAPI, true)
	f.str(&o.token, "token", "TOKEN", "", "bearer token (role ops) for an API started with --auth (prefer the environment variable: a flag shows in ps)", true)
	f.hide("token")
}

// announce says on stderr, once, which ledger the command acts on and
// where that choice came from, unless --quiet.
func (o *opsFlags) announce(target, source string) {
	if o.quiet || o.announced {
		return
	}
	o.announced = true
	announce(o.f.stderr, target, source)
}

// announceData says the command acts on the data directory.
func (o *opsFlags) announceData() {
	o.announce(o.data, o.f.source("data"))
}

// apiTarget returns the API an online operation goes through, or "" to
// work offline on the data directory: --api when given; else the running
// `ledger serve` of --data (its address file); else, when --data was not
// given (flag or LEDGER_DATA) and the default data directory holds no
// ledger, the default API.
//
// An explicit flag beats an environment variable: --data on the command
// line works offline on that directory even when LEDGER_API is set (only
// an --api flag then goes online).
//
// The second result says where the choice came from, for announce.
func (o *opsFlags) apiTarget() (string, string) {
	if o.apiURL != "" && (o.f.given("api") || !o.f.given("data")) {
		return o.apiURL, o.f.source("api")
	}
	if addr, ok := o.serveRunning(); ok {
		return "http://" + addr.HTTP, "the ledger serve running on " + o.data + ", " + o.f.source("data")
	}
	given := o.f.source("data") != "default"
	if _, err := os.Stat(filepath.Join(o.data, app.NATSDirName)); !given && err != nil {
		return client.DefaultAPI, "default: " + o.data + " holds no ledger"
	}
	return "", ""
}

// apiClient returns the client of an online operation.
func (o *opsFlags) apiClient(apiURL string) (*client.Client, error) {
	cl, err := client.New(apiURL, client.WithToken(o.token))
	if err != nil {
		return nil, usageError("%v", err)
	}
	return cl, nil
}

func (o *opsFlags) logger(stderr io.Writer) (zerolog.Logger, error) {
	l, err := logging.New(logging.Options{Format: o.logFormat, Level: o.logLevel, Out: stderr})
	if err != nil {
		return l, usageError("%v", err)
	}
	return l, nil
}

// reporter returns a progress reporter on stderr per --progress.
func (o *opsFlags) reporter(stderr io.Writer, log zerolog.Logger, desc, unit string) (*progress.Reporter, error) {
	var mode progress.Mode
	switch o.progress {
	case "auto", "":
		mode = progress.Auto
	case "bar":
		mode = progress.Bar
	case "log":
		mode = progress.Log
	case "off":
		mode = progress.Off
	default:
		return nil, usageError("--progress %q: want auto, bar, log or off", o.progress)
	}
	return progress.New(0, progress.Options{Description: desc, Unit: unit, Out: stderr, Logger: log, Mode: mode}), nil
}

func (o *opsFlags) projectionDir() string { return filepath.Join(o.data, app.ProjectionDirName) }

// serveRunning reports whether <data>/serve.addr.json says a `ledger
// serve` runs on this data directory: the file is there and someone holds
// the directory's lock (a file left by a killed process is not believed).
func (o *opsFlags) serveRunning() (api.Addr, bool) {
	b, err := os.ReadFile(filepath.Join(o.data, app.AddrFileName))
	if err != nil {
		return api.Addr{}, false
	}
	if o.locks > 0 {
		return api.Addr{}, false // we hold it: no serve runs
	}
	if _, held := datalock.Holder(o.data); !held {
		return api.Addr{}, false
	}
	var a api.Addr
	if json.Unmarshal(b, &a) != nil {
		return api.Addr{}, false
	}
	return a, true
}

// opsConn is a connection to the ledger's NATS, and the embedded server
// when the command started one.
type opsConn struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	srv    *natsserver.Server
	url    string
	unlock func() // releases the data lock taken for srv
}

// Close drains the connection and stops the embedded server, if any.
func (c *opsConn) Close() {
	if c.nc != nil {
		closed := make(chan struct{})
		c.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
		if err := c.nc.Drain(); err != nil {
			c.nc.Close()
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			c.nc.Close()
		}
	}
	if c.srv != nil {
		c.srv.Shutdown()
	}
	if c.unlock != nil {
		c.unlock()
		c.unlock = nil
	}
}

// connect reaches the ledger's NATS (see the file comment). create allows
// starting an embedded server on a <data>/nats that does not exist yet
// (import into a new ledger).
func (o *opsFlags) connect(ctx context.Context, name string, log zerolog.Logger, create bool) (*opsConn, error) {
	opts := []nats.Option{nats.Name("ledger " + name), nats.Timeout(5 * time.Second)}
	creds, err := o.creds.options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, creds...)
	c := &opsConn{}
	switch addr, running := o.serveRunning(); {
	case o.natsURL != "":
		o.announce(o.natsURL, o.f.source("nats-url"))
		c.url = o.natsURL
		c.nc, err = nats.Connect(o.natsURL, opts...)
	case running:
		o.announce(o.data, o.f.source("data")+"; through its running ledger serve at "+addr.NATS)
		c.url = addr.NATS
		c.nc, err = nats.Connect(addr.NATS, opts...)
		if err != nil {
			err = fmt.Errorf("%s names the running `ledger serve` at %s, which does not answer (if it is not running, remove the file): %w",
				filepath.Join(o.data, app.AddrFileName), addr.NATS, err)
		}
	default:
		o.announceData()
		dir := filepath.Join(o.data, app.NATSDirName)
		if _, serr := os.Stat(dir); serr != nil && !create {
			return nil, &unreachableError{msg: fmt.Sprintf("no NATS server: %s does not exist and no --nats-url was given (is --data the ledger's data directory?)", dir)}
		}
		if err := o.lockData(); err != nil {
			return nil, err
		}
		c.unlock = o.unlockData
		c.srv, err = natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Host: natsserver.DefaultHost, Port: natsserver.RandomPort, ConfigFile: o.natsConf, Logger: log.With().Str(logging.KeyComponent, "nats").Logger()})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("start the embedded NATS server on %s: %w", dir, err)
		}
		c.url = c.srv.ClientURL()
		c.nc, err = nats.Connect("", append(opts, nats.InProcessServer(c.srv.NatsServer()))...)
	}
	if err != nil {
		c.Close()
		if c.srv == nil { // a server of --nats-url or of a running serve: no ledger to talk to
			return nil, &unreachableError{msg: "connect to NATS: " + err.Error()}
		}
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	if c.js, err = jetstream.New(c.nc); err != nil {
		c.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	log.Debug().Str(logging.KeyNATSURL, c.url).Bool(logging.KeyEmbedded, c.srv != nil).Msg("connected")
	return c, nil
}

// refuseIfServing refuses an offline operation on a data directory that
// a running `ledger serve` (or another offline command) holds, and
// otherwise takes its lock: the caller must unlockData when done.
func (o *opsFlags) refuseIfServing() error {
	o.announceData()
	if addr, ok := o.serveRunning(); ok {
		return fmt.Errorf("`ledger serve` (HTTP %s) holds the projection of %s open: stop it first (Pebble allows one opener), "+
			"or run the command online with --api", addr.HTTP, o.data)
	}
	if _, err := os.Stat(o.data); err != nil {
		return fmt.Errorf("no ledger data directory: %w", err)
	}
	return o.lockData()
}

// parseSeqOrTime reads a point given as a sequence (digits) or an RFC 3339
// time (nanoseconds optional; a date YYYY-MM-DD means its midnight UTC).
func parseSeqOrTime(s string) (uint64, time.Time, error) {
	if s == "" {
		return 0, time.Time{}, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n == 0 {
			return 0, time.Time{}, errors.New("sequences start at 1")
		}
		return n, time.Time{}, nil
	}
	t, err := parseOpsTime(s)
	return 0, t, err
}

func parseOpsTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a sequence number nor an RFC 3339 time (2026-01-02T03:04:05Z) or date", s)
}

// writeOpsJSON writes v as indented JSON and a newline.
func writeOpsJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
