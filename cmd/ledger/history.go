package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mewledger/ledger/api"
)

func init() {
	register(&command{
		name:     "history",
		synopsis: "history [--space S] [-o table|json] [--min-seq N] ID",
		short:    "show every event filed under a proposal, with its effect",
		help: `Shows the history of proposal ID: one row per event, in stream order, with
the effect it had (applied, recorded, duplicate, late, unauthorized, invalid,
orphan, ignored). Also works for an id that only orphans or invalid events
name. -o json prints the API's history object exactly.`,
		run: runHistory,
	})
}

func runHistory(ctx context.Context, e env, args []string) error {
	var c clientOpts
	f := newFlags(commands["history"], e)
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
	raw, err := cl.HistoryRaw(ctx, pos[0], c.read())
	if err != nil {
		return clientError(c.apiURL, err)
	}
	if c.output == outputJSON {
		_, err = fmt.Fprint(e.stdout, string(raw))
		return err
	}
	var h api.History
	if err := json.Unmarshal(raw, &h); err != nil {
		return fmt.Errorf("the history from %s: %w", c.apiURL, err)
	}
	return renderHistory(e.stdout, h.ID, h.Space, h.Events)
}
