package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/proofs"
)

func init() {
	register(&command{
		name:     "checkpoint",
		synopsis: "checkpoint key [--data DIR | --checkpoint-key FILE | --api URL] | checkpoint latest [--api URL]",
		short:    "print the checkpoint verifier key, or the latest signed checkpoint",
		help: "checkpoint key prints the verifier key of the ledger's checkpoint signing key\n" +
			"(C2SP signed-note format, <origin>+<hash>+<base64>): all a third party needs\n" +
			"to check the ledger's checkpoints and evidence bundles. It reads the key file\n" +
			"(<data>/checkpoint.key, which `ledger serve` generates on first start, or\n" +
			"--checkpoint-key FILE) or, with --api, asks a running ledger\n" +
			"(GET /v1/checkpoint/key). checkpoint latest prints the latest signed\n" +
			"checkpoint (GET /v1/checkpoint), the note an auditor keeps to check later\n" +
			"that the log only grew. See docs/proofs.md.",
		run: runCheckpoint,
	})
}

func runCheckpoint(ctx context.Context, e env, args []string) error {
	var (
		data, keyFile, apiURL, token string
	)
	f := newFlags(commands["checkpoint"], e)
	f.str(&data, "data", "DIR", app.DefaultDataDir, "ledger data directory (for its checkpoint.key)", true)
	f.str(&keyFile, "checkpoint-key", "FILE", "", "the signing key file (default <data>/checkpoint.key)", true)
	f.str(&apiURL, "api", "URL", client.DefaultAPI, "the running ledger latest asks, and key asks when this flag is given", true)
	f.str(&token, "token", "TOKEN", "", "bearer token (role auditor) for an API started with --auth", true)
	f.hide("token")
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || (pos[0] != "key" && pos[0] != "latest") {
		return usageError("want `checkpoint key` or `checkpoint latest`")
	}
	apiGiven := pos[0] == "latest"
	f.fs.Visit(func(fl *flag.Flag) { apiGiven = apiGiven || fl.Name == "api" })
	if apiGiven {
		path := "/v1/checkpoint"
		if pos[0] == "key" {
			path += "/key"
		}
		cl, err := client.New(apiURL, client.WithToken(token))
		if err != nil {
			return usageError("%v", err)
		}
		var raw []byte
		if err := cl.Do(ctx, http.MethodGet, path, nil, nil, "", false, &raw); err != nil {
			return clientError(apiURL, err)
		}
		_, err = e.stdout.Write(raw)
		return err
	}
	if keyFile == "" {
		keyFile = filepath.Join(data, proofs.KeyFile)
	}
	skey, err := proofs.LoadKey(keyFile, "")
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no checkpoint key at %s: `ledger serve --data %s` generates one on first start (or give --checkpoint-key FILE)", keyFile, data)
	}
	if err != nil {
		return err
	}
	vkey, err := evidence.VerifierKeyOf(skey)
	if err != nil {
		return fmt.Errorf("%s: %w", keyFile, err)
	}
	_, err = fmt.Fprintln(e.stdout, strings.TrimSpace(vkey))
	return err
}
