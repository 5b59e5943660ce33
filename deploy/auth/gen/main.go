// Command gen manages the ledger's auth file until the ledger's CLI has an
// `auth` command for it:
//
//	go run ./deploy/auth/gen nats-conf -auth ledger-auth.yaml -o nats-auth.conf [-include base.conf]
//	go run ./deploy/auth/gen check -auth ledger-auth.yaml
//	go run ./deploy/auth/gen password          # random password + its bcrypt hash
//	go run ./deploy/auth/gen hash-password     # bcrypt of a password read from stdin
//	go run ./deploy/auth/gen nkey              # new user nkey: public key + seed
//	go run ./deploy/auth/gen token             # random API token + its sha256
//
// Secrets go to stdout; nothing is written unless -o is given.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mewledger/ledger/internal/auth/authcfg"
	"github.com/mewledger/ledger/internal/auth/httpauth"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: gen nats-conf|check|password|hash-password|nkey|token [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	auth := fs.String("auth", "ledger-auth.yaml", "the ledger's auth file")
	out := fs.String("o", "", "output file (nats-conf; default stdout)")
	include := fs.String("include", "", "nats-server config file to include first (nats-conf)")
	cost := fs.Int("cost", authcfg.DefaultBcryptCost, "bcrypt cost")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "nats-conf", "check":
		c, err := authcfg.Load(*auth)
		if err != nil {
			return err
		}
		if args[0] == "check" {
			fmt.Printf("%s: ok (%d NATS users, %d API tokens)\n", *auth, len(c.Principals()), len(c.HTTP.Tokens))
			return nil
		}
		if *out == "" {
			if *include != "" {
				return fmt.Errorf("-include needs -o (the include path is relative to the output file)")
			}
			_, err := os.Stdout.Write(c.NATSConfig(""))
			return err
		}
		return c.WriteNATSConfig(*out, *include)
	case "password":
		pw, hash, err := authcfg.NewPassword(*cost)
		if err != nil {
			return err
		}
		fmt.Printf("password: %s\nbcrypt:   %s\n", pw, hash)
	case "hash-password":
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("read password from stdin: %w", err)
		}
		hash, err := authcfg.HashPassword(strings.TrimRight(line, "\r\n"), *cost)
		if err != nil {
			return err
		}
		fmt.Println(hash)
	case "nkey":
		pub, seed, err := authcfg.NewUserNkey()
		if err != nil {
			return err
		}
		fmt.Printf("public: %s\nseed:   %s\n", pub, seed)
	case "token":
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		tok := base64.RawURLEncoding.EncodeToString(b)
		fmt.Printf("token:  %s\nsha256: %s\n", tok, httpauth.HashToken(tok))
	default:
		return fmt.Errorf("unknown command %q", args[0])
	}
	return nil
}
