package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

func init() {
	register(&command{
		name:     "list",
		synopsis: "list [filters] [--limit N] [--cursor C | --all] [-o table|json]",
		short:    "list proposals, newest first, by state / proposer / target / time / anomaly",
		help: `Lists proposals newest first, one page at a time (--limit, default 50), with
every filter of GET /v1/proposals. When there are more, the last line says
which --cursor gives the next page; --all follows the cursors to the end.
-o json prints the API's list object exactly (with --all: one object with
every proposal).`,
		run: runList,
	})
}

func runList(ctx context.Context, e env, args []string) error {
	var (
		c      clientOpts
		lf     client.ListFilter
		cursor string
		all    bool
	)
	f := newFlags(commands["list"], e)
	addClientFlags(f, &c, true)
	f.str(&lf.State, "state", "STATE", "", "pending, fulfilled, withdrawn, rejected or expired", false)
	f.str(&lf.Proposer, "proposer", "ID", "", "proposals from this participant", false)
	f.str(&lf.Target, "target", "ID", "", "proposals addressed to this participant (a member of to, or named by a targeting field)", false)
	f.str(&lf.Since, "since", "TIME", "", "created at or after (RFC 3339 or YYYY-MM-DD)", false)
	f.str(&lf.Until, "until", "TIME", "", "created before (RFC 3339 or YYYY-MM-DD)", false)
	f.str(&lf.Anomaly, "anomaly", "NAME", "", "proposals carrying this anomaly (e.g. fulfilled_after_withdrawn)", false)
	f.str(&lf.ActionType, "action-type", "TYPE", "", "kernel proposals with this action_type", false)
	f.str(&lf.ResourceType, "resource-type", "TYPE", "", "kernel proposals with this target.resource_type", false)
	f.str(&lf.Domain, "domain", "DOMAIN", "", "kernel proposals with this target.domain", false)
	f.str(&lf.Form, "form", "FORM", "", "proposals with an event of this lifecycle form (e.g. meup.lifecycle/status, bid, proposal-response)", false)
	f.integer(&lf.Limit, "limit", "N", 0, "page size, 1..1000 (default 50)", false)
	f.str(&cursor, "cursor", "C", "", "the page after this cursor (from the previous page)", false)
	f.boolean(&all, "all", false, "follow the cursors and list every match", false)
	var ids bool
	f.boolean(&ids, "ids", false, "print the proposals' ids only, one a line (the shell completion's source)", false)
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
	var (
		proposals []*api.Proposal
		next      string
	)
	for {
		raw, err := cl.ListPageRaw(ctx, lf, cursor, c.read())
		if err != nil {
			return clientError(c.apiURL, err)
		}
		if !all && c.output == outputJSON && !ids {
			_, err = fmt.Fprint(e.stdout, string(raw))
			return err
		}
		var page api.List
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("the list from %s: %w", c.apiURL, err)
		}
		proposals = append(proposals, page.Proposals...)
		next = page.NextCursor
		if !all || next == "" {
			break
		}
		cursor = next
	}
	if ids {
		for _, p := range proposals {
			fmt.Fprintln(e.stdout, p.ID)
		}
		return nil
	}
	if c.output == outputJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		if proposals == nil {
			proposals = []*api.Proposal{}
		}
		return enc.Encode(api.List{Proposals: proposals})
	}
	if err := renderList(e.stdout, proposals); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(e.stdout, "\nmore: ledger list --cursor %s (same filters)\n", next)
	}
	return nil
}
