package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
)

// atQueries is the part of `ledger at`'s synopsis after its flags.
const atQueries = "<get ID | history ID | list [--state S] [--proposer P] [--target T] [--anomaly A] [--since T] [--until T] [--limit N] [--cursor C] | stats>"

func init() {
	register(&command{
		name:     "at",
		synopsis: "at --seq N | --time T [--space S] [-o table|json] " + atQueries,
		short:    "answer get / history / list / stats as of a past sequence or time",
		help: "Answers get, history, list or stats as the ledger stood after sequence N or at\n" +
			"time T, by folding the log up to that point into a temporary projection,\n" +
			"removed afterwards. -o and --space work as in the client commands; the point\n" +
			"the answer reflects (the last sequence folded) goes to stderr. A point beyond\n" +
			"the log is an error. 'ledger at ... list --help' shows list's flags.",
		run: runAt,
		ops: true,
	})
}

// runAt is `ledger at`: answer get, history, list or stats as of a past
// sequence or time, by folding the log up to that point into a temporary
// projection (repair.At), removed afterwards. The answer is the API's JSON
// object on stdout; the point it reflects (the last sequence folded) goes
// to stderr. A point beyond the log is an error. -o table|json (env
// LEDGER_OUTPUT, default table) and --space (env LEDGER_SPACE) work as in
// the client commands.
func runAt(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	var (
		o                 opsFlags
		seq               uint64
		at, space, output string
		tmp               string
	)
	f := newFlags(commands["at"], e)
	f.u64(&seq, "seq", "N", 0, "the state after this sequence", false)
	f.str(&at, "time", "TIME", "", "the state at this time (RFC 3339): after every event up to the first one after it", false)
	f.str(&space, "space", "NAME", ledger.DefaultSpace, "space", true)
	f.str(&output, "output", "table|json", outputTable, "table, or json for the API's objects exactly", true)
	f.short("o", "output")
	f.str(&tmp, "tmp", "DIR", "", "directory for the temporary projection (default: the system's)", false)
	o.register(f)
	if err := f.parseLeading(args); err != nil {
		return err
	}
	var p repair.Point
	p.Seq = seq
	if at != "" {
		t, err := parseOpsTime(at)
		if err != nil {
			return usageError("--time: %v", err)
		}
		p.Time = t
	}
	if (p.Seq == 0) == p.Time.IsZero() {
		return usageError("give exactly one of --seq N and --time T")
	}
	if output != outputTable && output != outputJSON {
		return usageError("--output %q: want table or json", output)
	}
	if f.fs.NArg() == 0 {
		return usageError("which query? get ID, history ID, list or stats")
	}
	query, err := parseAtQuery(e, f.fs.Arg(0), f.fs.Args()[1:], &space)
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
	folder, err := o.folder(log)
	if err != nil {
		return err
	}
	v, err := repair.At(ctx, c.js, p, repair.Options{TempDir: tmp, Progress: rep.Func(), Folder: folder})
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
	if output == outputJSON {
		return writeOpsJSON(stdout, answer)
	}
	return renderAt(stdout, answer, space)
}

// renderAt prints an answer of `ledger at` as the client commands'
// tables.
func renderAt(w io.Writer, answer any, space string) error {
	switch a := answer.(type) {
	case *api.Proposal:
		return renderProposal(w, a)
	case api.History:
		return renderHistory(w, a.ID, a.Space, a.Events)
	case api.List:
		if err := renderList(w, a.Proposals); err != nil {
			return err
		}
		if a.NextCursor != "" {
			_, err := fmt.Fprintf(w, "next page: --cursor %s\n", a.NextCursor)
			return err
		}
		return nil
	case *api.Stats:
		return renderStats(w, space, a)
	}
	return writeOpsJSON(w, answer)
}

// parseAtQuery parses the query after `ledger at ...` (its own flags, on
// the one flag layer; --help shows them) and returns the function that
// answers it from a projection. spaceFlag is at's --space, which the
// query may also take.
func parseAtQuery(e env, name string, args []string, spaceFlag *string) (func(*repair.View) (any, error), error) {
	synopsis := map[string]string{"get": "get [--space S] ID", "history": "history [--space S] ID", "stats": "stats [--space S]",
		"list": "list [--space S] [--state S] [--proposer P] [--target T] [--anomaly A] [--since T] [--until T] [--limit N] [--cursor C]"}
	if _, ok := synopsis[name]; !ok {
		return nil, usageError("unknown query %q (want get, history, list or stats)", name)
	}
	qf := newFlags(&command{
		name:     "at " + name,
		synopsis: "at --seq N | --time T [flags] " + synopsis[name],
		help:     fmt.Sprintf("The %s query of 'ledger at' (see 'ledger help at' for the flags before it).", name),
	}, e)
	qf.str(spaceFlag, "space", "NAME", *spaceFlag, "space (the same as at's --space)", false)
	// parse parses the query's flags; the error names the query.
	parse := func(positionals int) ([]string, error) {
		pos, err := positional(qf, args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			return nil, err
		case err != nil:
			return nil, usageError("at %s: %s", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		case len(pos) != positionals && positionals == 1:
			return nil, usageError("at %s: want exactly one proposal id", name)
		case len(pos) != positionals:
			return nil, usageError("at %s: unexpected argument %q", name, pos[0])
		}
		return pos, nil
	}
	switch name {
	case "get":
		pos, err := parse(1)
		if err != nil {
			return nil, err
		}
		return func(v *repair.View) (any, error) { return v.Get(*spaceFlag, pos[0]) }, nil
	case "history":
		pos, err := parse(1)
		if err != nil {
			return nil, err
		}
		id := pos[0]
		return func(v *repair.View) (any, error) {
			h, err := v.History(*spaceFlag, id)
			if err != nil {
				return nil, err
			}
			return api.History{ID: id, Space: *spaceFlag, Events: h}, nil
		}, nil
	case "stats":
		if _, err := parse(0); err != nil {
			return nil, err
		}
		return func(v *repair.View) (any, error) { return v.Stats(*spaceFlag) }, nil
	}
	// list
	var q projections.ListQuery
	var state, since, until string
	qf.str(&state, "state", "STATE", "", "only proposals in this state", false)
	qf.str(&q.Proposer, "proposer", "NAME", "", "only proposals from this participant", false)
	qf.str(&q.Target, "target", "NAME", "", "only proposals with this participant among to", false)
	qf.str(&q.Anomaly, "anomaly", "KIND", "", "only proposals with this anomaly", false)
	qf.str(&since, "since", "TIME", "", "created at or after this time (RFC 3339)", false)
	qf.str(&until, "until", "TIME", "", "created before this time (RFC 3339)", false)
	qf.integer(&q.Limit, "limit", "N", 0, "page size", false)
	qf.str(&q.Cursor, "cursor", "CURSOR", "", "next_cursor of the previous page", false)
	if _, err := parse(0); err != nil {
		return nil, err
	}
	q.State = api.ProposalState(state)
	for _, x := range []struct {
		s string
		t *time.Time
	}{{since, &q.Since}, {until, &q.Until}} {
		if x.s == "" {
			continue
		}
		t, err := parseOpsTime(x.s)
		if err != nil {
			return nil, usageError("at list: %v", err)
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
			page.Proposals = []*api.Proposal{}
		}
		return api.List{Proposals: page.Proposals, NextCursor: page.NextCursor}, nil
	}, nil
}
