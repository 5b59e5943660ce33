package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mewledger/ledger/api"
)

func init() {
	register(&command{
		name:     "stats",
		synopsis: "stats [--space S] [-o table|json] [--min-seq N]",
		short:    "counts by state, rejection and withdrawal reason, anomaly, event type",
		help:     "Shows the statistics of a space. -o json prints the API's stats object exactly.",
		run:      runStats,
	})
}

func runStats(ctx context.Context, e env, args []string) error {
	var c clientOpts
	f := newFlags(commands["stats"], e)
	addClientFlags(f, &c, true)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q", f.fs.Args())
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	raw, err := cl.StatsRaw(ctx, c.read())
	if err != nil {
		return clientError(c.apiURL, err)
	}
	if c.output == outputJSON {
		_, err = fmt.Fprint(e.stdout, string(raw))
		return err
	}
	st := api.NewStats()
	if err := json.Unmarshal(raw, st); err != nil {
		return fmt.Errorf("the statistics from %s: %w", c.apiURL, err)
	}
	space := c.space
	if space == "" {
		space = "(server default)"
	}
	return renderStats(e.stdout, space, st)
}
