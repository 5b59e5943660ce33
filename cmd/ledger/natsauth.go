package main

import (
	"bytes"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/internal/auth/authcfg"
)

// natsCreds are the NATS credentials of a client subcommand (contract §10,
// internal/auth/authcfg): a user with a password file, or a user with an nkey
// seed file. Under authentication every user but the ledger's own gets its
// replies on its own inbox prefix, _INBOX.<user>, so the user name is
// needed with either secret.
type natsCreds struct {
	user, passwordFile, nkeyFile string
}

const (
	natsUserUsage     = "NATS user name (the auth configuration's user; it names your reply inbox _INBOX.<user>)"
	natsPasswordUsage = "file holding the NATS user's password"
	natsNkeyUsage     = "file holding the NATS user's nkey seed (SU...), instead of a password"
)

// register adds --nats-user, --nats-password-file and --nats-nkey to a
// subcommand's flags (env LEDGER_NATS_USER, ...).
func (c *natsCreds) register(f *flags) {
	f.str(&c.user, "nats-user", "USER", "", natsUserUsage, true)
	f.str(&c.passwordFile, "nats-password-file", "FILE", "", natsPasswordUsage, true)
	f.str(&c.nkeyFile, "nats-nkey", "SEEDFILE", "", natsNkeyUsage, true)
}

// options returns the nats.go options of the credentials (none when no
// flag is set). Errors are usage errors.
func (c *natsCreds) options() ([]nats.Option, error) {
	switch {
	case c.user == "" && c.passwordFile == "" && c.nkeyFile == "":
		return nil, nil
	case c.passwordFile != "" && c.nkeyFile != "":
		return nil, usageError("give --nats-password-file or --nats-nkey, not both")
	case c.user == "":
		return nil, usageError("--nats-password-file and --nats-nkey need --nats-user (the user name of the auth configuration: it names your reply inbox)")
	case c.passwordFile == "" && c.nkeyFile == "":
		return nil, usageError("--nats-user needs --nats-password-file or --nats-nkey")
	}
	opts := []nats.Option{authcfg.ClientInbox(c.user)}
	if c.passwordFile != "" {
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return nil, usageError("--nats-password-file: %v", err)
		}
		pw := bytes.TrimRight(b, "\r\n")
		if len(pw) == 0 {
			return nil, usageError("--nats-password-file: %s is empty", c.passwordFile)
		}
		return append(opts, nats.UserInfo(c.user, string(pw))), nil
	}
	o, err := nats.NkeyOptionFromSeed(c.nkeyFile)
	if err != nil {
		return nil, usageError("--nats-nkey: %v", err)
	}
	return append(opts, o), nil
}
