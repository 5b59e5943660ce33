package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

func init() {
	register(&command{
		name:     "events",
		synopsis: "events [filters] [--desc] [--limit N] [--cursor C | --all] [-o table|json] | events SEQ",
		short:    "list the ledger's events (the log), or show one stored message raw",
		help: `Lists the events of the ledger in stream order (--desc: newest first), one
page at a time (--limit, default 50), with every filter of GET /v1/events:
each event's effect, type, sender, the ids it is filed under (its
proposals), the anomalies it raised, its tool and main argument, and the
fold's reason for an invalid, ignored, orphaned or late one. --all-spaces
lists every space. When there are more, the last line says which --cursor
gives the next page; --all follows the cursors to the end.

With a sequence number (ledger events 42) it shows that stored message as
JetStream holds it: subject, stream time, headers, SHA-256 and the
original bytes, then its record. -o json prints the API's objects exactly.`,
		run: runEvents,
	})
}

func runEvents(ctx context.Context, e env, args []string) error {
	var (
		c               clientOpts
		ef              client.EventFilter
		cursor          string
		all, everySpace bool
	)
	f := newFlags(commands["events"], e)
	addClientFlags(f, &c, true)
	f.str(&ef.Effect, "effect", "EFFECT", "", "applied, recorded, duplicate, late, unauthorized, invalid, orphan or ignored", false)
	f.str(&ef.Type, "type", "TYPE", "", "event type (proposal, withdraw, reject, fulfil, response, note, approve, expire, gap, ignored)", false)
	f.str(&ef.Kind, "kind", "KIND", "", "envelope kind as sent (e.g. mcp/request)", false)
	f.str(&ef.Form, "form", "FORM", "", "lifecycle form (e.g. meup.lifecycle/status)", false)
	f.str(&ef.From, "from", "ID", "", "events from this sender", false)
	f.str(&ef.Proposal, "proposal", "ID", "", "events filed under this id (a proposal, or what an orphan waits for)", false)
	f.str(&ef.Event, "event", "ID", "", "events with this envelope id", false)
	f.str(&ef.Anomaly, "anomaly", "NAME", "", "events that raised this anomaly", false)
	f.str(&ef.Tool, "tool", "NAME", "", "tools/call events of this tool (params.name)", false)
	f.str(&ef.Reason, "reason", "CODE", "", "events with this reason code (e.g. unsafe)", false)
	f.str(&ef.Code, "code", "CODE", "", "events the fold refused with this code (e.g. not_json)", false)
	f.str(&ef.Since, "since", "TIME", "", "stored at or after (RFC 3339)", false)
	f.str(&ef.Until, "until", "TIME", "", "stored at or before (RFC 3339)", false)
	f.u64(&ef.SinceSeq, "since-seq", "SEQ", 0, "from this sequence on", false)
	f.u64(&ef.UntilSeq, "until-seq", "SEQ", 0, "up to this sequence", false)
	f.u64(&ef.AsOfSeq, "as-of-seq", "SEQ", 0, "the log as of this sequence", false)
	f.boolean(&ef.Desc, "desc", false, "newest first", false)
	f.boolean(&everySpace, "all-spaces", false, "every space (not only --space)", false)
	f.integer(&ef.Limit, "limit", "N", 50, "page size, 1..1000", false)
	f.str(&cursor, "cursor", "C", "", "the page after this cursor (from the previous page; same order)", false)
	f.boolean(&all, "all", false, "follow the cursors and list every match", false)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 1 {
		return usageError("unexpected arguments %q", f.fs.Args()[1:])
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	ef.Space = c.space
	if everySpace {
		ef.Space = client.AllSpaces
	}
	if f.fs.NArg() == 1 {
		seq, err := strconv.ParseUint(f.fs.Arg(0), 10, 64)
		if err != nil || seq == 0 {
			return usageError("SEQ %q: want a stream sequence (an integer ≥ 1)", f.fs.Arg(0))
		}
		raw, err := cl.RawEventAt(ctx, seq, ef.Space)
		if err != nil {
			return clientError(c.apiURL, err)
		}
		if c.output == outputJSON {
			return encodeJSON(e.stdout, raw)
		}
		return renderRawEvent(e.stdout, raw)
	}
	var (
		evs  []api.EventRecord
		next string
	)
	for {
		page, err := cl.EventsPage(ctx, ef, cursor)
		if err != nil {
			return clientError(c.apiURL, err)
		}
		evs = append(evs, page.Events...)
		next = page.NextCursor
		if !all || next == "" {
			break
		}
		cursor = next
	}
	if c.output == outputJSON {
		if evs == nil {
			evs = []api.EventRecord{}
		}
		return encodeJSON(e.stdout, api.EventPage{Events: evs, NextCursor: next})
	}
	if err := renderEvents(e.stdout, evs); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(e.stdout, "\nmore: ledger events --cursor %s (same filters and order)\n", next)
	}
	return nil
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func renderEvents(w io.Writer, evs []api.EventRecord) error {
	tw := table(w)
	fmt.Fprintln(tw, "SEQ\tAT\tSPACE\tID\tTYPE\tFROM\tEFFECT\tPROPOSALS\tTOOL\tARG\tANOMALIES\tREASON")
	for _, ev := range evs {
		why := ev.Reason
		if ev.Code != "" {
			why = ev.Code
		}
		if ev.Detail != "" && ev.Effect != "applied" {
			if why != "" {
				why += ": "
			}
			why += ev.Detail
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Seq, when(ev.At), ev.Space, orDash(ev.ID), orDash(ev.Type),
			orDash(ev.From), ev.Effect, list(ev.Proposals), orDash(ev.Tool), orDash(ev.Arg), list(ev.Anomalies), orDash(why))
	}
	return tw.Flush()
}

func renderRawEvent(w io.Writer, r *api.RawEvent) error {
	fmt.Fprintf(w, "seq      %d\nsubject  %s\ntime     %s\nsha256   %s\n", r.Seq, r.Subject, r.Time.Format("2006-01-02T15:04:05.000000000Z07:00"), r.SHA256)
	keys := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Headers[k] {
			fmt.Fprintf(w, "header   %s: %s\n", k, v)
		}
	}
	if r.Event != nil {
		ev := r.Event
		fmt.Fprintf(w, "effect   %s (filed under %s)\n", ev.Effect, list(ev.Proposals))
		if ev.Code != "" || ev.Detail != "" {
			fmt.Fprintf(w, "reason   %s %s\n", ev.Code, ev.Detail)
		}
	}
	fmt.Fprintf(w, "bytes    %d\n\n", len(r.Data))
	if r.Text != "" || len(r.Data) == 0 {
		_, err := fmt.Fprintln(w, r.Text)
		return err
	}
	_, err := fmt.Fprintf(w, "%q\n", r.Data) // not UTF-8: quoted, every byte visible
	return err
}
