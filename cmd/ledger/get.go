package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mewledger/ledger/client"
)

func init() {
	register(&command{
		name:     "get",
		synopsis: "get [--space S] [-o table|json] [--min-seq N] ID",
		short:    "show one proposal's state",
		help:     "Shows the projected state of proposal ID: a table by default, or with -o json\nthe API's proposal object exactly.",
		run:      runGet,
	})
}

func runGet(ctx context.Context, e env, args []string) error {
	var c clientOpts
	f := newFlags(commands["get"], e)
	addClientFlags(f, &c, true)
	pos, err := positional(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("want exactly one proposal ID, got %d arguments", len(pos))
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	raw, err := cl.GetRaw(ctx, pos[0], c.read())
	if err != nil {
		return clientError(c.api, err)
	}
	if c.output == outputJSON {
		_, err = fmt.Fprint(e.stdout, string(raw))
		return err
	}
	var p client.Proposal
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("the proposal from %s: %w", c.api, err)
	}
	return renderProposal(e.stdout, &p)
}
