package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mewledger/ledger/internal/repair"
	"github.com/mewledger/ledger/internal/wire"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
)

const atUsage = "at --seq N | --time T [--space S] [-o table|json] <get ID | history ID | list [--state S] [--proposer P] [--target T] [--anomaly A] [--since T] [--until T] [--limit N] [--cursor C] | stats>"

// runAt is `ledger at`: answer get, history, list or stats as of a past
// sequence or time, by folding the log up to that point into a temporary
// projection (repair.At), removed afterwards. The answer is the API's JSON
// object on stdout; the point it reflects (the last sequence folded) goes
// to stderr. A point beyond the log is an error. -o table|json (env
// LEDGER_OUTPUT, default table) and --space (env LEDGER_SPACE) work as in
// the client commands.
func runAt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opsFlags
	fs := newOpsFlagSet("at", stdout, atUsage)
	seq := fs.Uint64("seq", 0, "the state after this sequence")
	at := fs.String("time", "", "the state at this time (RFC 3339): after every event up to the first one after it")
	space := fs.String("space", envOr("LEDGER_SPACE", ledger.DefaultSpace), "space (env LEDGER_SPACE)")
	output := fs.String("output", envOr("LEDGER_OUTPUT", outputTable), "table, or json for the API's objects exactly (env LEDGER_OUTPUT)")
	fs.StringVar(output, "o", *output, "alias of --output")
	tmp := fs.String("tmp", "", "directory for the temporary projection (default: the system's)")
	o.register(fs.FlagSet, stderr)
	if err := fs.parse(args, true); err != nil {
		return err
	}
	var p repair.Point
	p.Seq = *seq
	if *at != "" {
		t, err := parseOpsTime(*at)
		if err != nil {
			return opsUsage("--time: %v", err)
		}
		p.Time = t
	}
	if (p.Seq == 0) == p.Time.IsZero() {
		return opsUsage("give exactly one of --seq N and --time T")
	}
	if *output != outputTable && *output != outputJSON {
		return opsUsage("--output %q: want table or json", *output)
	}
	if fs.NArg() == 0 {
		return opsUsage("which query? get ID, history ID, list or stats")
	}
	query, err := parseAtQuery(fs.Arg(0), fs.Args()[1:], space)
	if err != nil {
		return err
	}

	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	c, err := o.connect(ctx, "at", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	rep, err := o.reporter(stderr, log, "at: fold", "events")
	if err != nil {
		return err
	}
	v, err := repair.At(ctx, c.js, p, repair.Options{TempDir: *tmp, Progress: rep.Func()})
	rep.Finish(err)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer v.Close()
	answer, err := query(v)
	if err != nil {
		return fmt.Errorf("as of %s: %w", p, err)
	}
	fmt.Fprintf(stderr, "as of %s (log folded through seq %d)\n", p, v.AppliedSeq())
	if *output == outputJSON {
		return writeOpsJSON(stdout, answer)
	}
	return renderAt(stdout, answer, *space)
}

// renderAt prints an answer of `ledger at` as the client commands'
// tables.
func renderAt(w io.Writer, answer any, space string) error {
	switch a := answer.(type) {
	case *projections.Proposal:
		return renderProposal(w, a)
	case wire.History:
		return renderHistory(w, a.ID, a.Space, a.Events)
	case wire.List:
		if err := renderList(w, a.Proposals); err != nil {
			return err
		}
		if a.NextCursor != "" {
			_, err := fmt.Fprintf(w, "next page: --cursor %s\n", a.NextCursor)
			return err
		}
		return nil
	case *projections.Stats:
		return renderStats(w, space, a)
	}
	return writeOpsJSON(w, answer)
}

// envOr returns the environment variable name, or def when it is unset
// or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseAtQuery parses the query after `ledger at ...` and returns the
// function that answers it from a projection.
func parseAtQuery(name string, args []string, spaceFlag *string) (func(*repair.View) (any, error), error) {
	qfs := flag.NewFlagSet("at "+name, flag.ContinueOnError)
	qfs.SetOutput(io.Discard)
	qfs.StringVar(spaceFlag, "space", *spaceFlag, "space")
	needID := func() (string, error) {
		if err := qfs.Parse(args); err != nil {
			return "", opsUsage("at %s: %v", name, err)
		}
		if qfs.NArg() != 1 {
			return "", opsUsage("at %s: want exactly one proposal id", name)
		}
		return qfs.Arg(0), nil
	}
	switch name {
	case "get":
		id, err := needID()
		if err != nil {
			return nil, err
		}
		return func(v *repair.View) (any, error) { return v.Get(*spaceFlag, id) }, nil
	case "history":
		id, err := needID()
		if err != nil {
			return nil, err
		}
		return func(v *repair.View) (any, error) {
			h, err := v.History(*spaceFlag, id)
			if err != nil {
				return nil, err
			}
			return wire.History{ID: id, Space: *spaceFlag, Events: h}, nil
		}, nil
	case "stats":
		if err := qfs.Parse(args); err != nil {
			return nil, opsUsage("at %s: %v", name, err)
		}
		return func(v *repair.View) (any, error) { return v.Stats(*spaceFlag) }, nil
	case "list":
		var q projections.ListQuery
		var state, since, until string
		qfs.StringVar(&state, "state", "", "state")
		qfs.StringVar(&q.Proposer, "proposer", "", "proposer")
		qfs.StringVar(&q.Target, "target", "", "a member of to")
		qfs.StringVar(&q.Anomaly, "anomaly", "", "anomaly")
		qfs.StringVar(&since, "since", "", "created at or after (RFC 3339)")
		qfs.StringVar(&until, "until", "", "created before (RFC 3339)")
		qfs.IntVar(&q.Limit, "limit", 0, "page size")
		qfs.StringVar(&q.Cursor, "cursor", "", "next_cursor of the previous page")
		if err := qfs.Parse(args); err != nil {
			return nil, opsUsage("at %s: %v", name, err)
		}
		if qfs.NArg() > 0 {
			return nil, opsUsage("at list: unexpected argument %q", qfs.Arg(0))
		}
		q.State = projections.ProposalState(state)
		for _, x := range []struct {
			s string
			t *time.Time
		}{{since, &q.Since}, {until, &q.Until}} {
			if x.s == "" {
				continue
			}
			t, err := parseOpsTime(x.s)
			if err != nil {
				return nil, opsUsage("at list: %v", err)
			}
			*x.t = t
		}
		return func(v *repair.View) (any, error) {
			q.Space = *spaceFlag
			page, err := v.List(q)
			if err != nil {
				return nil, err
			}
			if page.Proposals == nil {
				page.Proposals = []*projections.Proposal{}
			}
			return wire.List{Proposals: page.Proposals, NextCursor: page.NextCursor}, nil
		}, nil
	}
	return nil, opsUsage("unknown query %q (want get, history, list or stats)", name)
}
