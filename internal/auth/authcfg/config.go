// Package authcfg is the ledger's authentication configuration (contract §10,
// §5.8): one YAML (or JSON) file, given to `ledger serve --auth FILE`, that
// lists who may talk to the ledger and what each may do, and turns it into
// nats-server users with permissions and into the HTTP API's tokens.
//
// The file (see deploy/auth/ledger-auth.yaml for a worked example):
//
//	version: 1
//	nats:
//	  service:            # the ledger's own NATS user
//	    user: ledger
//	    password: "$2a$11$..."          # bcrypt hash: what the server checks
//	    password_file: secrets/ledger.password  # plaintext the ledger connects with
//	    # or: nkey: U... and seed_file: secrets/ledger.nk
//	    durables: [projector]           # the projectors' durable consumer names
//	  agents:             # MEW participants that publish lifecycle events
//	    - id: alice                     # the envelope `from` = subject sender token
//	      user: alice                   # NATS user name (default: the id)
//	      password: "$2a$11$..."        # or nkey: U...
//	      spaces: [research]            # may publish only as itself, in these spaces
//	      read: [research]              # may subscribe to these spaces' live events
//	  auditors:           # read the raw log (stream info, message get, consumers)
//	    - {user: audit, nkey: U...}
//	  gateways:           # trusted front ends that use the submit service
//	    - {user: gateway, password: "$2a$11$...", spaces: ["*"]}
//	  bridges:            # `ledger bridge mew --history`: publish under each envelope's real sender
//	    - {user: recorder, nkey: U..., spaces: [research]}
//	http:                 # the HTTP API (package httpauth)
//	  tokens:
//	    - {name: audit-team, sha256: "<hex sha256 of the token>", roles: [auditor]}
//	  open_metrics: false
//	  write_limit: {per_second: 50, burst: 100}
//
// Contract:
//
//   - Load and Parse refuse anything doubtful with an error wrapping
//     ErrConfig that names the field (nats.agents[1].spaces[0]): unknown
//     fields, plaintext passwords (only bcrypt hashes are accepted), invalid
//     nkeys, duplicate users, nkeys or (space, id) pairs, an agent id of
//     "ledger" (the expirer's sender), a service password file that does not
//     match its hash, a seed file that does not match its nkey.
//   - Each agent may publish only to ledger.<space>.*.*.<id> for its spaces
//     (subjects.AgentPublish), so the subject's sender token is guaranteed by
//     the server, and the fold marks an envelope whose `from` differs as
//     invalid (spoofed_sender). Agents may not use the submit service (it
//     cannot tell who sent a request), the JetStream API or any other subject;
//     they may subscribe only to their own inbox and to the live events of
//     the spaces listed in `read`.
//   - Every user but the service receives replies on its own inbox prefix,
//     _INBOX.<user> (subjects.InboxPrefix): a client must connect with
//     nats.CustomInboxPrefix(subjects.InboxPrefix(user)). Nobody else can
//     subscribe there, so acks, submit replies and log reads are private.
//   - Nobody, the service included, may publish to
//     $JS.API.STREAM.{DELETE,PURGE,MSG.DELETE}.LEDGER. The service keeps
//     stream create/update (EnsureStream), consumers, acks, direct appends on
//     every ledger subject, the submit service and $SRV discovery.
//   - Auditors may read the whole log (contract: one stream, so NATS cannot
//     confine a log reader to a space; per-space reading goes through the HTTP
//     API) but not create, pull from or delete the projectors' durable
//     consumers (nats.service.durables), and not write anything.
//   - Gateways may publish submit requests (ledger.submit.<space>) for their
//     spaces ("*": all): the submit service is for trusted gateways only.
//   - Bridges (contract §14, history mode) may publish event subjects of their
//     spaces under any sender but "ledger" (ledger.<space>.*.*.* minus
//     ledger.<space>.*.*.ledger), submit requests and gap reports: they
//     record what the MEW gateway's log says each participant sent, so
//     they must name senders other than themselves; the ledger's own
//     sender stays reserved.
//
// NATSConfig renders the users as a nats-server configuration file
// (authorization block) for the embedded server (natsserver.Options
// .ConfigFile) or to include in an external cluster's configuration;
// ApplyTo sets the same users on a server.Options directly.
package authcfg

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nkeys"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/ledger"
)

// Version is the configuration format version this package reads.
const Version = 1

// DefaultDurable is the durable the service's projector uses unless
// nats.service.durables names others (projections.DefaultDurable).
const DefaultDurable = "projector"

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("authcfg: invalid configuration")

// FieldError is a configuration error about one field. It wraps ErrConfig.
type FieldError struct {
	File  string // the configuration file, when loaded from one
	Field string // e.g. nats.agents[1].spaces[0]
	Msg   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("authcfg: ")
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrConfig) true.
func (e *FieldError) Unwrap() error { return ErrConfig }

// Config is the whole file.
type Config struct {
	Version int             `yaml:"version" json:"version"`
	NATS    *NATS           `yaml:"nats" json:"nats"`
	HTTP    httpauth.Config `yaml:"http" json:"http"`

	file string // path it was loaded from ("" for Parse)
	dir  string // base of relative paths
}

// NATS lists the NATS principals.
type NATS struct {
	Service  Service   `yaml:"service" json:"service"`
	Agents   []Agent   `yaml:"agents" json:"agents"`
	Auditors []Auditor `yaml:"auditors" json:"auditors"`
	Gateways []Gateway `yaml:"gateways" json:"gateways"`
	Bridges  []Bridge  `yaml:"bridges" json:"bridges"`
	// AuthTimeout is how long the server waits for a client to
	// authenticate (nats-server's authorization timeout; 0: its default,
	// 2s). bcrypt checks count: raise it with high bcrypt costs on slow
	// machines, or use nkeys.
	AuthTimeout time.Duration `yaml:"auth_timeout" json:"auth_timeout"`
}

// MaxAuthTimeout bounds NATS.AuthTimeout.
const MaxAuthTimeout = time.Minute

// Credentials are what nats-server checks: a user name with a bcrypt
// password hash, or an nkey public key. User also names the principal
// (logs, inbox prefix) when it uses an nkey.
type Credentials struct {
	User     string `yaml:"user" json:"user"`
	Password string `yaml:"password" json:"password"`
	Nkey     string `yaml:"nkey" json:"nkey"`
}

// Service is the ledger's own user. PasswordFile (with Password) or
// SeedFile (with Nkey) holds the secret the ledger connects with; relative
// paths are relative to the configuration file.
type Service struct {
	Credentials  `yaml:",inline"`
	PasswordFile string   `yaml:"password_file" json:"password_file"`
	SeedFile     string   `yaml:"seed_file" json:"seed_file"`
	Durables     []string `yaml:"durables" json:"durables"`
}

// Agent is a MEW participant publishing lifecycle events.
type Agent struct {
	// ID is the participant id: the envelope's `from`, and the sender
	// token of the subjects it may publish to.
	ID          string `yaml:"id" json:"id"`
	Credentials `yaml:",inline"`
	// Spaces it may publish into (as ID).
	Spaces []string `yaml:"spaces" json:"spaces"`
	// Read lists the spaces whose live events it may subscribe to.
	Read []string `yaml:"read" json:"read"`
}

// Auditor reads the raw log.
type Auditor struct {
	Credentials `yaml:",inline"`
}

// Gateway is a trusted front end using the submit service.
type Gateway struct {
	Credentials `yaml:",inline"`
	// Spaces it may submit into; "*" means every space.
	Spaces []string `yaml:"spaces" json:"spaces"`
}

// Bridge is a MEW bridge in history mode (`ledger bridge mew --history
// --nats-url`): it publishes each envelope under the sender the MEW
// gateway's log names, in its spaces.
type Bridge struct {
	Credentials `yaml:",inline"`
	// Spaces it records into (named; no "*").
	Spaces []string `yaml:"spaces" json:"spaces"`
}

// AllSpaces in Gateway.Spaces means every space.
const AllSpaces = "*"

// Load reads, parses and validates the configuration file at path,
// including the service's secret files.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := parse(data, filepath.Dir(abs), path)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func parse(data []byte, dir, file string) (*Config, error) {
	c := &Config{file: file, dir: dir}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, &FieldError{File: file, Msg: "parse: " + err.Error()}
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return nil, &FieldError{File: file, Msg: "more than one YAML document"}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// File returns the path the configuration was loaded from ("" after Parse).
func (c *Config) File() string { return c.file }

// NATSEnabled reports whether NATS authentication is configured.
func (c *Config) NATSEnabled() bool { return c.NATS != nil }

// Validate checks the whole configuration, fills defaults (version,
// agent users, service durables, HTTP limits) and reads the service's
// secret files to check them against the hash or nkey.
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{File: c.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch c.Version {
	case 0:
		c.Version = Version
	case Version:
	default:
		return bad("version", "version %d, this ledger reads version %d", c.Version, Version)
	}
	if err := c.HTTP.Validate(); err != nil {
		return bad("http", "%v", strings.TrimPrefix(err.Error(), httpauth.ErrConfig.Error()+": "))
	}
	if c.NATS == nil {
		if len(c.HTTP.Tokens) == 0 {
			return bad("", "neither nats nor http tokens are configured: nothing to authenticate")
		}
		return nil
	}
	v := &validator{bad: bad, users: map[string]string{}, nkeys: map[string]string{}, senders: map[[2]string]string{}}
	n := c.NATS
	if n.AuthTimeout < 0 || n.AuthTimeout > MaxAuthTimeout {
		return bad("nats.auth_timeout", "%v, want 0 (the server's default) up to %v", n.AuthTimeout, MaxAuthTimeout)
	}

	// Service.
	s := &n.Service
	if err := v.credentials("nats.service", &s.Credentials, true); err != nil {
		return err
	}
	switch {
	case s.Password != "" && s.PasswordFile == "":
		return bad("nats.service.password_file", "required with a password: the ledger connects with the plaintext it holds")
	case s.Nkey != "" && s.SeedFile == "":
		return bad("nats.service.seed_file", "required with an nkey: the ledger signs with the seed it holds")
	case s.Password != "" && s.SeedFile != "":
		return bad("nats.service.seed_file", "given with a password; use nkey with seed_file, or password with password_file")
	case s.Nkey != "" && s.PasswordFile != "":
		return bad("nats.service.password_file", "given with an nkey; use nkey with seed_file, or password with password_file")
	}
	if err := c.checkServiceSecret(); err != nil {
		return err
	}
	if len(s.Durables) == 0 {
		s.Durables = []string{DefaultDurable}
	}
	for i, d := range s.Durables {
		f := fmt.Sprintf("nats.service.durables[%d]", i)
		if d == "" || strings.ContainsAny(d, ".*> \t\r\n/\\") || len(d) > 256 || !utf8.ValidString(d) {
			return bad(f, "%q is not a consumer name (no '.', '*', '>', '/', '\\' or white space)", d)
		}
		if slices.Contains(s.Durables[:i], d) {
			return bad(f, "%q listed twice", d)
		}
	}

	// Agents.
	for i := range n.Agents {
		a := &n.Agents[i]
		f := fmt.Sprintf("nats.agents[%d]", i)
		if err := checkID(a.ID); err != nil {
			return bad(f+".id", "%v", err)
		}
		if a.User == "" {
			if !plainName(a.ID) {
				return bad(f+".user", "required: the id %q is not usable as a user name ([A-Za-z0-9_-]{1,128})", a.ID)
			}
			a.User = a.ID
		}
		if err := v.credentials(f, &a.Credentials, true); err != nil {
			return err
		}
		if len(a.Spaces) == 0 {
			return bad(f+".spaces", "an agent needs at least one space to publish into")
		}
		if err := checkSpaces(bad, f+".spaces", a.Spaces, false); err != nil {
			return err
		}
		for j, sp := range a.Spaces {
			key := [2]string{sp, a.ID}
			if other, ok := v.senders[key]; ok {
				return bad(fmt.Sprintf("%s.spaces[%d]", f, j), "agent id %q in space %q is also given to user %q: one sender, one login", a.ID, sp, other)
			}
			v.senders[key] = a.User
		}
		if err := checkSpaces(bad, f+".read", a.Read, false); err != nil {
			return err
		}
	}

	// Auditors.
	for i := range n.Auditors {
		if err := v.credentials(fmt.Sprintf("nats.auditors[%d]", i), &n.Auditors[i].Credentials, true); err != nil {
			return err
		}
	}

	// Gateways.
	for i := range n.Gateways {
		g := &n.Gateways[i]
		f := fmt.Sprintf("nats.gateways[%d]", i)
		if err := v.credentials(f, &g.Credentials, true); err != nil {
			return err
		}
		if len(g.Spaces) == 0 {
			return bad(f+".spaces", "a gateway needs at least one space (or \"*\")")
		}
		if err := checkSpaces(bad, f+".spaces", g.Spaces, true); err != nil {
			return err
		}
	}

	// Bridges.
	for i := range n.Bridges {
		b := &n.Bridges[i]
		f := fmt.Sprintf("nats.bridges[%d]", i)
		if err := v.credentials(f, &b.Credentials, true); err != nil {
			return err
		}
		if len(b.Spaces) == 0 {
			return bad(f+".spaces", "a bridge needs at least one space")
		}
		if err := checkSpaces(bad, f+".spaces", b.Spaces, false); err != nil {
			return err
		}
	}
	return nil
}

type validator struct {
	bad     func(field, format string, args ...any) error
	users   map[string]string    // user name -> field
	nkeys   map[string]string    // nkey -> field
	senders map[[2]string]string // (space, agent id) -> user
}

// credentials checks one principal's credentials and registers its user
// name and nkey as taken.
func (v *validator) credentials(field string, c *Credentials, needUser bool) error {
	switch {
	case c.User == "" && needUser:
		return v.bad(field+".user", "required (the NATS user name, or with an nkey the principal's name)")
	case c.User != "" && !plainName(c.User):
		return v.bad(field+".user", "%q: user names are [A-Za-z0-9_-]{1,128} (they name the user's inbox, _INBOX.<user>)", c.User)
	case c.Password == "" && c.Nkey == "":
		return v.bad(field, "needs a password (bcrypt hash) or an nkey")
	case c.Password != "" && c.Nkey != "":
		return v.bad(field, "has both a password and an nkey; give one")
	}
	if other, ok := v.users[c.User]; ok {
		return v.bad(field+".user", "%q is already the user of %s", c.User, other)
	}
	v.users[c.User] = field
	if c.Password != "" {
		if _, err := bcrypt.Cost([]byte(c.Password)); err != nil || !strings.HasPrefix(c.Password, "$2") {
			return v.bad(field+".password", "not a bcrypt hash: plaintext passwords are refused (hash one with `htpasswd -bnBC 11 \"\" PASSWORD | tr -d ':\\n'` or `nats server passwd`)")
		}
	}
	if c.Nkey != "" {
		if !nkeys.IsValidPublicUserKey(c.Nkey) {
			return v.bad(field+".nkey", "%q is not an nkey user public key (U...; make one with `nk -gen user -pubout`)", c.Nkey)
		}
		if other, ok := v.nkeys[c.Nkey]; ok {
			return v.bad(field+".nkey", "already the nkey of %s", other)
		}
		v.nkeys[c.Nkey] = field
	}
	return nil
}

// plainName reports whether s matches [A-Za-z0-9_-]{1,128}.
func plainName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkID checks an agent id as the ledger checks an envelope's from.
func checkID(id string) error {
	switch {
	case id == "":
		return errors.New("required (the agent's participant id, the envelopes' from)")
	case !utf8.ValidString(id):
		return errors.New("not valid UTF-8")
	case len(id) > ledger.MaxIDBytes:
		return fmt.Errorf("%d bytes, over the limit of %d", len(id), ledger.MaxIDBytes)
	case id == ledger.LedgerSender:
		return fmt.Errorf("%q is the ledger's own sender (ledger/expire): no agent may publish as it", id)
	case hasControl(id):
		return errors.New("has control characters")
	}
	return nil
}

// checkSpaces checks a list of space names (wildcard "*" allowed when
// star).
func checkSpaces(bad func(string, string, ...any) error, field string, spaces []string, star bool) error {
	for i, sp := range spaces {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case sp == AllSpaces && star:
			if len(spaces) > 1 {
				return bad(f, "\"*\" (every space) must be alone")
			}
		case sp == AllSpaces:
			return bad(f, "\"*\" is not allowed here: name the spaces")
		case sp == "":
			return bad(f, "empty space name")
		case !utf8.ValidString(sp):
			return bad(f, "not valid UTF-8")
		case len(sp) > ledger.MaxSpaceBytes:
			return bad(f, "%d bytes, over the limit of %d", len(sp), ledger.MaxSpaceBytes)
		case hasControl(sp):
			return bad(f, "has control characters")
		}
		if slices.Contains(spaces[:i], sp) {
			return bad(f, "%q listed twice", sp)
		}
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// path resolves a path of the file against its directory.
func (c *Config) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

// checkServiceSecret reads the service's password or seed file and checks
// it against the configured hash or nkey.
func (c *Config) checkServiceSecret() error {
	s := &c.NATS.Service
	bad := func(field, format string, args ...any) error {
		return &FieldError{File: c.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if s.PasswordFile != "" {
		pw, err := readSecret(c.path(s.PasswordFile))
		if err != nil {
			return bad("nats.service.password_file", "%v", err)
		}
		if err := bcrypt.CompareHashAndPassword([]byte(s.Password), pw); err != nil {
			return bad("nats.service.password_file", "%s does not hold the password whose hash is nats.service.password", s.PasswordFile)
		}
	}
	if s.SeedFile != "" {
		kp, err := c.serviceKeyPair()
		if err != nil {
			return bad("nats.service.seed_file", "%v", err)
		}
		pub, err := kp.PublicKey()
		kp.Wipe()
		if err != nil {
			return bad("nats.service.seed_file", "%v", err)
		}
		if pub != s.Nkey {
			return bad("nats.service.seed_file", "%s is the seed of %s, not of nats.service.nkey %s", s.SeedFile, pub, s.Nkey)
		}
	}
	return nil
}

// readSecret reads a secret file, without its trailing newline.
func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return b, nil
}

// serviceKeyPair reads the service's seed file (a bare seed, or an nkey
// or creds file holding one).
func (c *Config) serviceKeyPair() (nkeys.KeyPair, error) {
	b, err := readSecret(c.path(c.NATS.Service.SeedFile))
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fmt.Errorf("no user seed in %s: %w", c.NATS.Service.SeedFile, err)
	}
	if seed, err := kp.Seed(); err != nil || len(seed) == 0 {
		return nil, fmt.Errorf("%s holds a public key, not a seed", c.NATS.Service.SeedFile)
	}
	return kp, nil
}
