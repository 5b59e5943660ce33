// Package subjects owns every NATS subject string the ledger uses and the
// reversible encoding of arbitrary ids into subject tokens.
//
// Event subjects have the shape
//
//	ledger.<space>.<key>.<type>.<sender>
//
// where each of space, key and sender is an arbitrary UTF-8 string encoded
// with [EncodeToken], and type is one of the lifecycle event types. The
// submit service listens on ledger.submit.<space> (three tokens), so the
// LEDGER stream binds exactly five-token subjects ([StreamSubjects]) and never
// captures a submit request.
//
// No other package builds or parses a subject string. All functions here are
// pure and safe for concurrent use.
package subjects

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// Root is the first token of every ledger subject.
	Root = "ledger"
	// StreamName is the JetStream stream holding the log.
	StreamName = "LEDGER"
	// StreamSubjects is the subject filter the LEDGER stream binds: every
	// five-token ledger subject. (contract §4 says "ledger.>"; that would also
	// capture ledger.submit.<space> requests and make JetStream answer them.)
	StreamSubjects = Root + ".*.*.*.*"
	// SubmitRoot is the subject prefix of the submit service.
	SubmitRoot = Root + ".submit"
	// MaxRawTokenLen is the longest value used as a token without encoding.
	MaxRawTokenLen = 128
	// EncodedPrefix marks an encoded token.
	EncodedPrefix = "~"
)

// Errors returned by this package. Match them with errors.Is.
var (
	// ErrBadSubject is returned when a subject is not a five-token ledger
	// event subject.
	ErrBadSubject = errors.New("subjects: not a ledger event subject")
	// ErrBadToken is returned when a token is not a valid encoding.
	ErrBadToken = errors.New("subjects: invalid token")
	// ErrEmpty is returned when a value to encode is empty.
	ErrEmpty = errors.New("subjects: empty value")
)

var b64 = base64.RawURLEncoding

// plain reports whether s matches [A-Za-z0-9_-]{1,128}.
func plain(s string) bool {
	if len(s) == 0 || len(s) > MaxRawTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// EncodeToken turns any non-empty string into a valid NATS subject token: a
// value matching [A-Za-z0-9_-]{1,128} is returned as is; anything else
// becomes "~" followed by the unpadded base64url of its bytes. The empty
// string encodes to "~" (an empty base64 body), which DecodeToken maps back
// to "". EncodeToken never fails.
func EncodeToken(s string) string {
	if plain(s) {
		return s
	}
	return EncodedPrefix + b64.EncodeToString([]byte(s))
}

// DecodeToken reverses EncodeToken. It returns ErrBadToken (wrapped with the
// token) when tok is neither a plain token nor a valid encoding, or when the
// encoding was not canonical (a value that would have been used as is, or
// bytes that are not UTF-8), so that every value has exactly one token.
func DecodeToken(tok string) (string, error) {
	if !strings.HasPrefix(tok, EncodedPrefix) {
		if !plain(tok) {
			return "", fmt.Errorf("%w: %q", ErrBadToken, tok)
		}
		return tok, nil
	}
	raw, err := b64.DecodeString(tok[len(EncodedPrefix):])
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadToken, tok, err)
	}
	s := string(raw)
	if plain(s) || !utf8.ValidString(s) || EncodeToken(s) != tok {
		return "", fmt.Errorf("%w: %q is not the canonical encoding", ErrBadToken, tok)
	}
	return s, nil
}

// Event is a decoded event subject.
type Event struct {
	Space  string // workspace (tenant)
	Key    string // correlation key: correlation_id[0], or the envelope id
	Type   string // lifecycle type token (proposal, withdraw, ...)
	Sender string // the envelope's from
}

// String builds the subject ledger.<space>.<key>.<type>.<sender>.
// Type is used verbatim and must be a plain token (the lifecycle types are).
func (e Event) String() string {
	return Root + "." + EncodeToken(e.Space) + "." + EncodeToken(e.Key) + "." + e.Type + "." + EncodeToken(e.Sender)
}

// FiledUnder is where an event published on subject is filed: the space
// and key ParseEvent decodes, or, for a subject that does not parse, its
// raw second and third tokens (the key is the whole subject when there is
// no third token), so that even an unparseable subject's event is filed
// somewhere deterministic.
func FiledUnder(subject string) (space, key string) {
	if ev, err := ParseEvent(subject); err == nil {
		return ev.Space, ev.Key
	}
	parts := strings.SplitN(subject, ".", 5)
	if len(parts) > 1 {
		space = parts[1]
	}
	if len(parts) > 2 {
		key = parts[2]
	}
	if key == "" {
		key = subject
	}
	return space, key
}

// ParseEvent decodes a five-token ledger event subject. It returns
// ErrBadSubject or ErrBadToken (wrapped) for anything else. It does not check
// that Type is a known lifecycle type: the fold decides what an unknown type
// means.
func ParseEvent(subject string) (Event, error) {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 || parts[0] != Root {
		return Event{}, fmt.Errorf("%w: %q", ErrBadSubject, subject)
	}
	var e Event
	var err error
	if e.Space, err = DecodeToken(parts[1]); err != nil {
		return Event{}, fmt.Errorf("space token: %w", err)
	}
	if e.Key, err = DecodeToken(parts[2]); err != nil {
		return Event{}, fmt.Errorf("key token: %w", err)
	}
	if !plain(parts[3]) {
		return Event{}, fmt.Errorf("type token: %w: %q", ErrBadToken, parts[3])
	}
	e.Type = parts[3]
	if e.Sender, err = DecodeToken(parts[4]); err != nil {
		return Event{}, fmt.Errorf("sender token: %w", err)
	}
	return e, nil
}

// Filter returns a subject filter over the event subjects. Empty arguments
// are wildcards. Use it for consumers and replays that select by space, key,
// type or sender.
func Filter(space, key, typ, sender string) string {
	tok := func(v string, enc bool) string {
		if v == "" {
			return "*"
		}
		if enc {
			return EncodeToken(v)
		}
		return v
	}
	return Root + "." + tok(space, true) + "." + tok(key, true) + "." + tok(typ, false) + "." + tok(sender, true)
}

// Submit returns the submit-service subject for a space:
// ledger.submit.<space>.
func Submit(space string) string {
	return SubmitRoot + "." + EncodeToken(space)
}

// SubmitWildcard is the subject the submit service subscribes to, for every
// space.
const SubmitWildcard = SubmitRoot + ".*"

// ParseSubmit returns the space of a submit subject; a space token that
// does not decode, or decodes to the empty space, is ErrBadToken.
func ParseSubmit(subject string) (string, error) {
	rest, ok := strings.CutPrefix(subject, SubmitRoot+".")
	if !ok || strings.Contains(rest, ".") {
		return "", fmt.Errorf("%w: %q is not a submit subject", ErrBadSubject, subject)
	}
	return decodeSpace(rest)
}

// decodeSpace decodes a subject's space token; the empty space ("~") is
// refused: a space is never guessed (contract §10), and "" would mean the
// default one to every caller.
func decodeSpace(tok string) (string, error) {
	s, err := DecodeToken(tok)
	if err == nil && s == "" {
		err = fmt.Errorf("%w: %q: the space is empty", ErrBadToken, tok)
	}
	return s, err
}

// AgentPublish returns the publish permission for one agent:
// ledger.<space>.*.*.<sender> (contract §10).
func AgentPublish(space, sender string) string {
	return Root + "." + EncodeToken(space) + ".*.*." + EncodeToken(sender)
}

// SpaceFilter returns ledger.<space>.*.*.* (read permission or consumer
// filter for one space).
func SpaceFilter(space string) string { return Filter(space, "", "", "") }
