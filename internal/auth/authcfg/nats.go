package authcfg

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/subjects"
)

// Kind is a principal's kind.
type Kind string

// The kinds of principal.
const (
	KindService Kind = "service"
	KindAgent   Kind = "agent"
	KindAuditor Kind = "auditor"
	KindGateway Kind = "gateway"
	KindBridge  Kind = "bridge"
)

// Permissions are one user's NATS permissions. Lists are sorted and
// without duplicates; an empty allow list with a non-nil deny list means
// "everything but".
type Permissions struct {
	PublishAllow   []string
	PublishDeny    []string
	SubscribeAllow []string
	SubscribeDeny  []string
	// AllowResponses lets the user publish one reply to the reply subject
	// of each request it received (the submit service's replies).
	AllowResponses bool
}

// Principal is one NATS user with its permissions.
type Principal struct {
	Kind     Kind
	User     string
	Password string // bcrypt hash, or ""
	Nkey     string // public key, or ""
	Perms    Permissions
}

// ForbiddenStreamOps are the JetStream API operations on LEDGER nobody may
// request: deleting the stream, purging it, deleting a message. JetStream's
// deny_delete/deny_purge stop the last two but not a stream delete
// (appendlog.EnsureStream), so permissions are what protects the log.
var ForbiddenStreamOps = []string{"DELETE", "PURGE", "MSG.DELETE"}

// Principals returns every NATS user of the configuration with its
// permissions, service first, then agents, auditors, gateways and bridges in file
// order. It returns nil when NATS authentication is not configured.
func (c *Config) Principals() []Principal {
	if c.NATS == nil {
		return nil
	}
	n := c.NATS
	var out []Principal

	var forbidden []string
	for _, op := range ForbiddenStreamOps {
		forbidden = append(forbidden, subjects.JSStreamAPI(op))
	}

	// The ledger: appends on every event subject, the JetStream API (stream
	// create/update, consumers, gets), consumer acks, the submit service
	// and its discovery subjects, its inboxes, its signed checkpoints;
	// replies to any requester.
	out = append(out, Principal{
		Kind: KindService, User: n.Service.User, Password: n.Service.Password, Nkey: n.Service.Nkey,
		Perms: Permissions{
			PublishAllow:   []string{subjects.StreamSubjects, subjects.JSAPIAll, subjects.JSAck(">"), subjects.ServiceDiscovery, subjects.AllInboxes, subjects.CheckpointWildcard},
			PublishDeny:    forbidden,
			SubscribeAllow: []string{subjects.SubmitWildcard, subjects.GapWildcard, subjects.ServiceDiscovery, subjects.AllInboxes},
			AllowResponses: true,
		},
	})

	for _, a := range n.Agents {
		p := Permissions{SubscribeAllow: []string{subjects.InboxFilter(a.User)}}
		for _, sp := range a.Spaces {
			p.PublishAllow = append(p.PublishAllow, subjects.AgentPublish(sp, a.ID))
		}
		for _, sp := range a.Read {
			p.SubscribeAllow = append(p.SubscribeAllow, subjects.SpaceFilter(sp))
		}
		out = append(out, Principal{Kind: KindAgent, User: a.User, Password: a.Password, Nkey: a.Nkey, Perms: p})
	}

	for _, a := range n.Auditors {
		p := Permissions{
			PublishAllow: []string{
				subjects.JSAPIInfo, subjects.JSAPIStreamNames, subjects.JSAPIStreamList,
				subjects.JSStreamAPI("INFO"), subjects.JSStreamAPI("MSG.GET"),
				subjects.JSConsumerAPI("CREATE", ">"), subjects.JSConsumerAPI("MSG.NEXT", ">"),
				subjects.JSConsumerAPI("INFO", ">"), subjects.JSConsumerAPI("DELETE", ">"),
				subjects.JSConsumerAPI("NAMES", ""), subjects.JSConsumerAPI("LIST", ""),
			},
			// Auditors may follow the signed checkpoints (contract §16).
			SubscribeAllow: []string{subjects.InboxFilter(a.User), subjects.CheckpointWildcard},
		}
		p.PublishAllow = append(p.PublishAllow, subjects.JSDirectGet()...)
		// The projectors' durables are the ledger's: an auditor must not
		// reconfigure, drain or delete them.
		for _, d := range n.Service.Durables {
			p.PublishDeny = append(p.PublishDeny,
				subjects.JSConsumerAPI("CREATE", d), subjects.JSConsumerAPI("CREATE", d)+".>",
				subjects.JSConsumerAPI("MSG.NEXT", d), subjects.JSConsumerAPI("DELETE", d),
				subjects.JSLegacyDurableCreate(d))
		}
		out = append(out, Principal{Kind: KindAuditor, User: a.User, Password: a.Password, Nkey: a.Nkey, Perms: p})
	}

	for _, g := range n.Gateways {
		p := Permissions{SubscribeAllow: []string{subjects.InboxFilter(g.User)}}
		for _, sp := range g.Spaces {
			// Submit requests, and gap reports of the bridges it runs
			// (contract §14: the ledger writes the ledger/gap event).
			if sp == AllSpaces {
				p.PublishAllow = append(p.PublishAllow, subjects.SubmitWildcard, subjects.GapWildcard)
			} else {
				p.PublishAllow = append(p.PublishAllow, subjects.Submit(sp), subjects.Gap(sp))
			}
		}
		out = append(out, Principal{Kind: KindGateway, User: g.User, Password: g.Password, Nkey: g.Nkey, Perms: p})
	}

	for _, b := range n.Bridges {
		p := Permissions{SubscribeAllow: []string{subjects.InboxFilter(b.User)}}
		for _, sp := range b.Spaces {
			p.PublishAllow = append(p.PublishAllow, subjects.SpaceFilter(sp), subjects.Submit(sp), subjects.Gap(sp))
			p.PublishDeny = append(p.PublishDeny, subjects.Filter(sp, "", "", ledger.LedgerSender))
		}
		out = append(out, Principal{Kind: KindBridge, User: b.User, Password: b.Password, Nkey: b.Nkey, Perms: p})
	}

	for i := range out {
		p := &out[i].Perms
		p.PublishAllow, p.PublishDeny = tidy(p.PublishAllow), tidy(p.PublishDeny)
		p.SubscribeAllow, p.SubscribeDeny = tidy(p.SubscribeAllow), tidy(p.SubscribeDeny)
	}
	return out
}

func tidy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// ServerPermissions converts p to nats-server's form.
func (p Permissions) ServerPermissions() *server.Permissions {
	sp := &server.Permissions{}
	if len(p.PublishAllow)+len(p.PublishDeny) > 0 {
		sp.Publish = &server.SubjectPermission{Allow: slices.Clone(p.PublishAllow), Deny: slices.Clone(p.PublishDeny)}
	}
	if len(p.SubscribeAllow)+len(p.SubscribeDeny) > 0 {
		sp.Subscribe = &server.SubjectPermission{Allow: slices.Clone(p.SubscribeAllow), Deny: slices.Clone(p.SubscribeDeny)}
	}
	if p.AllowResponses {
		sp.Response = &server.ResponsePermission{
			MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
			Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION,
		}
	}
	return sp
}

// ApplyTo sets the configuration's users (passwords) and nkey users on so,
// replacing any it had. It is the programmatic twin of NATSConfig.
func (c *Config) ApplyTo(so *server.Options) {
	so.Users, so.Nkeys = nil, nil
	if c.NATS != nil && c.NATS.AuthTimeout > 0 {
		so.AuthTimeout = c.NATS.AuthTimeout.Seconds()
	}
	for _, p := range c.Principals() {
		if p.Nkey != "" {
			so.Nkeys = append(so.Nkeys, &server.NkeyUser{Nkey: p.Nkey, Permissions: p.Perms.ServerPermissions()})
		} else {
			so.Users = append(so.Users, &server.User{Username: p.User, Password: p.Password, Permissions: p.Perms.ServerPermissions()})
		}
	}
}

// NATSConfig renders the users as a nats-server configuration file: one
// authorization block, with a comment per user. include, when not empty,
// is a configuration file included first (a relative path, resolved by
// nats-server against the generated file's directory): the generated
// authorization block comes after it and so replaces any it has.
func (c *Config) NATSConfig(include string) []byte {
	var b strings.Builder
	src := "the ledger's auth configuration"
	if c.file != "" {
		src = filepath.Base(c.file)
	}
	fmt.Fprintf(&b, "# Generated from %s by the ledger (internal/auth/authcfg): NATS users and\n", src)
	b.WriteString("# permissions (contract §10). Do not edit: change the source and generate again.\n")
	if include != "" {
		fmt.Fprintf(&b, "\ninclude %s\n", quote(include))
	}
	b.WriteString("\nauthorization {\n")
	if c.NATS != nil && c.NATS.AuthTimeout > 0 {
		fmt.Fprintf(&b, "  timeout: %s\n", strconv.FormatFloat(c.NATS.AuthTimeout.Seconds(), 'f', -1, 64))
	}
	b.WriteString("  users: [\n")
	for _, p := range c.Principals() {
		fmt.Fprintf(&b, "    # %s %s\n    {\n", p.Kind, p.User)
		if p.Nkey != "" {
			fmt.Fprintf(&b, "      nkey: %s\n", quote(p.Nkey))
		} else {
			fmt.Fprintf(&b, "      user: %s\n      password: %s\n", quote(p.User), quote(p.Password))
		}
		b.WriteString("      permissions: {\n")
		writePerm(&b, "publish", p.Perms.PublishAllow, p.Perms.PublishDeny)
		writePerm(&b, "subscribe", p.Perms.SubscribeAllow, p.Perms.SubscribeDeny)
		if p.Perms.AllowResponses {
			b.WriteString("        allow_responses: true\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return []byte(b.String())
}

func writePerm(b *strings.Builder, name string, allow, deny []string) {
	if len(allow)+len(deny) == 0 {
		return
	}
	fmt.Fprintf(b, "        %s: {\n", name)
	if len(allow) > 0 {
		fmt.Fprintf(b, "          allow: %s\n", quoteList(allow))
	}
	if len(deny) > 0 {
		fmt.Fprintf(b, "          deny: %s\n", quoteList(deny))
	}
	b.WriteString("        }\n")
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// quote writes a double-quoted nats-server configuration string. Inside
// double quotes the parser expands no variables; only \ and " need
// escaping (values never hold control characters: Validate refuses them).
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// WriteNATSConfig writes NATSConfig to path (mode 0600, replaced
// atomically). include, when not empty, is another configuration file
// (any path) to include first; it is referred to relative to path's
// directory, as nats-server requires.
func (c *Config) WriteNATSConfig(path, include string) error {
	rel := ""
	if include != "" {
		absInc, err := filepath.Abs(include)
		if err != nil {
			return fmt.Errorf("authcfg: include %s: %w", include, err)
		}
		absPath, err := filepath.Abs(path)
		if err != nil {
			return fmt.Errorf("authcfg: %s: %w", path, err)
		}
		if rel, err = filepath.Rel(filepath.Dir(absPath), absInc); err != nil {
			return fmt.Errorf("authcfg: include %s from %s: %w", include, path, err)
		}
		rel = filepath.ToSlash(rel)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nats-auth-*.conf")
	if err != nil {
		return fmt.Errorf("authcfg: write NATS config: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(c.NATSConfig(rel)); err != nil {
		tmp.Close()
		return fmt.Errorf("authcfg: write NATS config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("authcfg: write NATS config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("authcfg: write NATS config: %w", err)
	}
	return nil
}

// ServiceConnectOptions returns the nats.go options the ledger connects
// with as its service user: user and password from password_file, or the
// nkey signed with seed_file.
func (c *Config) ServiceConnectOptions() ([]nats.Option, error) {
	if c.NATS == nil {
		return nil, nil
	}
	s := c.NATS.Service
	if s.PasswordFile != "" {
		pw, err := readSecret(c.path(s.PasswordFile))
		if err != nil {
			return nil, fmt.Errorf("authcfg: service password: %w", err)
		}
		return []nats.Option{nats.UserInfo(s.User, string(pw))}, nil
	}
	kp, err := c.serviceKeyPair()
	if err != nil {
		return nil, fmt.Errorf("authcfg: service seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("authcfg: service seed: %w", err)
	}
	return []nats.Option{nats.Nkey(pub, kp.Sign)}, nil
}

// DurableListed reports whether a projector durable is one of
// nats.service.durables, which auditors may not touch. A projector running
// under another name still works, unprotected: warn at start-up.
func (c *Config) DurableListed(name string) bool {
	return c.NATS != nil && slices.Contains(c.NATS.Service.Durables, name)
}

// ClientInbox returns the inbox option every user but the service must
// connect with: nats.CustomInboxPrefix(subjects.InboxPrefix(user)).
func ClientInbox(user string) nats.Option {
	return nats.CustomInboxPrefix(subjects.InboxPrefix(user))
}
