package bridge

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/ledger"
)

// Defaults of Options.
const (
	// DefaultBackoffMin and DefaultBackoffMax bound the wait between
	// reconnection attempts (doubling from the first, with jitter: each
	// wait is between half the step and the step). The cap keeps a bridge
	// prompt: it joins again within about BackoffMax of the gateway's
	// return.
	DefaultBackoffMin = 250 * time.Millisecond
	DefaultBackoffMax = 4 * time.Second
	// DefaultJoinTimeout bounds the wait for the gateway's system/welcome.
	DefaultJoinTimeout = 10 * time.Second
	// DefaultProbeInterval is how often the bridge asks the gateway who is
	// joined under its name (GET /participants), to notice an eviction.
	DefaultProbeInterval = time.Second
	// DefaultPollInterval is how often a followed history file is checked
	// for new lines and rotation.
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultStopTimeout bounds the last gap report when the bridge stops.
	DefaultStopTimeout = 10 * time.Second
	// DefaultMaxBacklogBytes bounds the envelopes received and not yet
	// stored (their bytes, plus 64 a piece).
	DefaultMaxBacklogBytes = 64 << 20
	// DefaultBatchSize is the most envelopes one append request carries.
	DefaultBatchSize = 1000
	// DefaultPingLimit is the most pings a second the gateway may send
	// before the bridge calls it a ping storm and ends the connection.
	DefaultPingLimit = 100
	// DefaultFrameTimeout bounds the time one frame may take to arrive
	// once it began, and DefaultMaxFrameBytes its size: beyond either the
	// gateway is sending an endless frame and the connection is ended.
	DefaultFrameTimeout  = time.Minute
	DefaultMaxFrameBytes = 64 << 20
)

// ErrOptions is wrapped by Options.Validate errors.
var ErrOptions = errors.New("bridge: invalid options")

// Options configures a Bridge.
type Options struct {
	// Gateway is the MEW gateway's WebSocket URL (ws:// or wss://; any
	// path). Required unless HistoryFile is set.
	Gateway string
	// MEWSpace is the recorded MEW space's id (space.id of its
	// space.yaml). Required.
	MEWSpace string
	// Participant is the bridge's participant id in the MEW space; it must
	// be unique there (a participant joining under it evicts the bridge).
	// Required.
	Participant string
	// Token is the participant's MEW token (sent in the join message).
	Token string
	// Space is the ledger space the envelopes go to. Default: MEWSpace.
	Space string
	// HistoryFile, if set, is the gateway's envelope-history.jsonl: the
	// bridge follows it instead of joining over WebSocket, and appends each
	// delivered envelope under the sender of its received record.
	HistoryFile string
	// Once, with HistoryFile, reads the file to its end (a copied or
	// rotated gateway log), appends what the ledger lacks (what it has is
	// answered duplicate and not stored again), records the follower's
	// end as a gap and makes Run return: healing holes later.
	Once bool
	// Sink appends to the ledger. Required.
	Sink Sink
	// BackoffMin and BackoffMax bound the wait between reconnection
	// attempts. Defaults DefaultBackoffMin, DefaultBackoffMax.
	BackoffMin, BackoffMax time.Duration
	// JoinTimeout bounds the wait for the welcome. Default DefaultJoinTimeout.
	JoinTimeout time.Duration
	// ProbeInterval is how often the gateway's GET /participants is read to
	// notice an eviction; negative turns the probe off. Default
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// EchoAfter is how long the bridge's socket may be silent before the
	// echo check sends the bridge's own message through the gateway;
	// EchoTimeout how long it waits for it to come back before it takes
	// the bridge for evicted (see echo.go). A negative EchoAfter turns the
	// check off. Defaults DefaultEchoAfter, DefaultEchoTimeout: an
	// eviction is noticed within EchoAfter + EchoTimeout (1.8 s).
	EchoAfter, EchoTimeout time.Duration
	// PollInterval is how often a history file is checked. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// StopTimeout bounds the gap report made when the bridge stops.
	// Default DefaultStopTimeout.
	StopTimeout time.Duration
	// MaxBacklogBytes bounds the backlog: lifecycle envelopes received and
	// not yet stored (each counted as its size plus 64 bytes). When the
	// ledger is slower than the space and the backlog is full, envelopes
	// are dropped, and the hole is recorded as a gap. Default
	// DefaultMaxBacklogBytes.
	MaxBacklogBytes int
	// BatchSize is the most envelopes one append request carries (at most
	// 1000, the submit service's limit). Default DefaultBatchSize.
	BatchSize int
	// PingLimit, FrameTimeout and MaxFrameBytes bound hostile input (a
	// ping storm, an endless frame): beyond them the connection is ended
	// and the hole recorded. Defaults DefaultPingLimit,
	// DefaultFrameTimeout, DefaultMaxFrameBytes.
	PingLimit     int
	FrameTimeout  time.Duration
	MaxFrameBytes int64
	// OnStored, if set, is called by the writer for every envelope the
	// ledger answered as stored (or already stored), with the time the
	// bridge received it and the time the answer came (benchmarks).
	OnStored func(received, stored time.Time)
	// HTTPClient reads the gateway's /participants. Default one with a 5 s
	// timeout.
	HTTPClient *http.Client
	// Metrics, if set, counts frames, gaps and the connection state.
	Metrics *Metrics
	// Now is the clock of gap times. Default time.Now.
	Now func() time.Time
	// Logger gets start, stop, gap and refusal lines.
	Logger zerolog.Logger
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Space == "" {
		o.Space = o.MEWSpace
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = DefaultBackoffMin
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffMin)
	}
	if o.JoinTimeout == 0 {
		o.JoinTimeout = DefaultJoinTimeout
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.EchoAfter == 0 {
		o.EchoAfter = DefaultEchoAfter
	}
	if o.EchoTimeout <= 0 {
		o.EchoTimeout = DefaultEchoTimeout
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.MaxBacklogBytes == 0 {
		o.MaxBacklogBytes = DefaultMaxBacklogBytes
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.PingLimit == 0 {
		o.PingLimit = DefaultPingLimit
	}
	if o.FrameTimeout == 0 {
		o.FrameTimeout = DefaultFrameTimeout
	}
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Sink == nil:
		return bad("Sink is required")
	case o.Once && o.HistoryFile == "":
		return bad("once reads a history file: give the history file")
	case o.MEWSpace == "":
		return bad("the MEW space id is required (space.id of the space's space.yaml)")
	case o.Participant == "":
		return bad("the bridge's participant id is required")
	case !validID(o.Participant):
		return bad("participant %q is not 1..%d bytes of UTF-8 without control characters", o.Participant, ledger.MaxIDBytes)
	case o.Participant == ledger.LedgerSender:
		return bad("participant %q is the ledger's own sender; name the bridge otherwise", o.Participant)
	case !validID(o.Space):
		return bad("ledger space %q is not 1..%d bytes of UTF-8 without control characters", o.Space, ledger.MaxSpaceBytes)
	case o.BackoffMin < 0 || o.BackoffMax < o.BackoffMin:
		return bad("backoff %v..%v: want 0 < min ≤ max", o.BackoffMin, o.BackoffMax)
	case o.JoinTimeout < 0 || o.PollInterval < 0 || o.StopTimeout < 0 || o.FrameTimeout < 0:
		return bad("negative timeout or interval")
	case o.MaxBacklogBytes < 0:
		return bad("max backlog %d bytes: want a positive size", o.MaxBacklogBytes)
	case o.BatchSize < 0 || o.BatchSize > 1000:
		return bad("batch size %d: want 1..1000", o.BatchSize)
	case o.PingLimit < 0:
		return bad("ping limit %d: want a positive number", o.PingLimit)
	case o.MaxFrameBytes < 0 || o.MaxFrameBytes < ledger.MaxEnvelopeBytes:
		return bad("max frame %d bytes: want at least %d", o.MaxFrameBytes, ledger.MaxEnvelopeBytes)
	}
	if o.HistoryFile != "" {
		return nil
	}
	if o.Gateway == "" {
		return bad("the gateway's WebSocket URL is required (ws://HOST:PORT)")
	}
	if _, err := participantsURL(o.Gateway, o.MEWSpace); err != nil {
		return bad("%v", err)
	}
	return nil
}

// validID reports whether s is an id the ledger takes (contract §2).
func validID(s string) bool {
	return s != "" && len(s) <= ledger.MaxIDBytes && utf8.ValidString(s) &&
		!strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// participantsURL is the gateway's GET /participants?space=ID for its
// WebSocket URL (same host; http for ws, https for wss).
func participantsURL(gateway, space string) (string, error) {
	u, err := url.Parse(gateway)
	if err != nil {
		return "", fmt.Errorf("gateway %q: %v", gateway, err)
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("gateway %q: want a ws:// or wss:// URL", gateway)
	}
	if u.Host == "" {
		return "", fmt.Errorf("gateway %q has no host", gateway)
	}
	u.Path, u.RawQuery, u.Fragment = "/participants", url.Values{"space": {space}}.Encode(), ""
	return u.String(), nil
}
