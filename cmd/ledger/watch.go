package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/client"
)

func init() {
	register(&command{
		name:     "watch",
		synopsis: "watch [--space S] [--proposal ID] [--state STATE] [--since-seq N] [--count N] [-o table|json]",
		short:    "follow every change of a proposal's state or anomalies, live (GET /v1/watch)",
		help: `Prints one line per change of a proposal's state or anomalies, in stream
order, as the projection folds them: the sequence, the proposal, its state
before and after, the anomalies the change raised and the event that decided
it. A change of a MEW space's holes (contract §14: a window no recorder
recorded opened, or a later recorder or --history --once healed it) is one
line too, "holes <mew space>" with the windows opened and healed (unless
--proposal or --state narrows the watch). Without --since-seq it starts with the changes folded from now on;
--since-seq 0 replays every change first. A dropped connection is reopened
(with Last-Event-ID), so no change is missed or printed twice. --count N
stops after N changes; otherwise it runs until interrupted. -o json prints
each change as the API sent it, one JSON object a line.`,
		run: runWatch,
	})
}

func runWatch(ctx context.Context, e env, args []string) error {
	var (
		c          clientOpts
		wo         client.WatchOptions
		since      string
		count      int
		headerDone bool
	)
	f := newFlags(commands["watch"], e)
	addClientFlags(f, &c, true)
	f.str(&wo.Proposal, "proposal", "ID", "", "only this proposal's changes", false)
	f.str(&wo.State, "state", "STATE", "", "only changes into this state (pending, fulfilled, withdrawn, rejected, expired)", false)
	f.str(&since, "since-seq", "N", "", "start after stream sequence N (0: from the beginning)", false)
	f.integer(&count, "count", "N", 0, "stop after N changes (0: run until interrupted)", false)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError("unexpected arguments %q", f.fs.Args())
	}
	if c.minSeq != 0 {
		return usageError("--min-seq does not apply to watch; use --since-seq")
	}
	if since != "" {
		n, err := strconv.ParseUint(since, 10, 64)
		if err != nil {
			return usageError("--since-seq %q: want a stream sequence (a non-negative integer)", since)
		}
		wo.SinceSeq, wo.FromStart = n, true
	}
	if count < 0 {
		return usageError("--count %d: want ≥ 0", count)
	}
	wo.Space = c.space
	cl, err := c.client()
	if err != nil {
		return err
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	seen := 0
	print := func(line string, raw []byte) error {
		if c.output == outputJSON {
			if _, err := fmt.Fprintf(e.stdout, "%s\n", raw); err != nil {
				return err
			}
		} else {
			if !headerDone {
				if _, err := fmt.Fprintf(e.stdout, "%-8s %-20s %-24s %-22s %-28s %s\n", "SEQ", "AT", "PROPOSAL", "STATE", "ANOMALIES RAISED", "EVENT"); err != nil {
					return err
				}
				headerDone = true
			}
			if _, err := fmt.Fprintln(e.stdout, line); err != nil {
				return err
			}
		}
		if seen++; count > 0 && seen >= count {
			return errWatchDone
		}
		return nil
	}
	wo.OnHoles = func(hc api.HoleChange, raw []byte) error { return print(holesLine(hc), raw) }
	err = cl.WatchFunc(ctx, wo, func(ch api.Change, raw []byte) error { return print(watchLine(ch), raw) })
	if err != nil && !errors.Is(err, errWatchDone) {
		return clientError(c.apiURL, err)
	}
	if err == nil {
		return c.timedOut(ctx)
	}
	return nil
}

// errWatchDone stops the watch after --count changes.
var errWatchDone = errors.New("ledger: watch: count reached")

// watchLine is one change as a table row.
func watchLine(ch api.Change) string {
	state := string(ch.State)
	switch {
	case ch.PrevState == "":
		state = "new → " + state
	case ch.PrevState != ch.State:
		state = string(ch.PrevState) + " → " + state
	}
	added := "-"
	if len(ch.Added) > 0 {
		added = strings.Join(ch.Added, ",")
	}
	ev := ch.Event
	if ch.DecidedBy != "" {
		ev += " by " + ch.DecidedBy
	}
	if ev == "" {
		ev = "-"
	}
	id := ch.ID
	if ch.Space != "" && ch.Space != "default" {
		id = ch.Space + "/" + id
	}
	return fmt.Sprintf("%-8d %-20s %-24s %-22s %-28s %s", ch.Seq, ch.At.UTC().Format(time.RFC3339), id, state, added, ev)
}

// holesLine is one change of a MEW space's holes as a row: the windows
// opened and healed (between the envelopes on either side; "open": no
// recorder back yet) and how many holes the MEW space has now.
func holesLine(hc api.HoleChange) string {
	ws := func(hs []api.Hole) string {
		if len(hs) == 0 {
			return "-"
		}
		var out []string
		for _, h := range hs {
			out = append(out, holeEdge(h.After, "start")+".."+holeEdge(h.Before, "open")+" ["+strings.Join(h.Recorders, ",")+"]")
		}
		return strings.Join(out, " ")
	}
	name := "holes " + hc.MEWSpace
	if hc.Space != "" && hc.Space != "default" {
		name = hc.Space + "/" + name
	}
	return fmt.Sprintf("%-8d %-20s %-24s opened %s; healed %s; %d hole(s) now", hc.Seq, "-", name, ws(hc.Opened), ws(hc.Healed), len(hc.Holes))
}

// holeEdge names the envelope on one side of a hole (its id, else its
// sequence).
func holeEdge(e *api.HoleEdge, none string) string {
	switch {
	case e == nil:
		return none
	case e.ID != "":
		return e.ID
	}
	return "seq " + strconv.FormatUint(e.Seq, 10)
}
