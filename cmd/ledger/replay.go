package main

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/internal/ops/replay"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
)

func init() {
	register(&command{
		name:     "replay",
		synopsis: "replay [--since SEQ|TIME] [--until SEQ|TIME] [--space S] [--type T] [--proposal ID] [--republish-to PREFIX [--republish-url URL] [--republish-js]]",
		short:    "stream the log's original envelopes out, or republish them",
		help: "Prints the log's original envelopes, filtered, as JSON lines on stdout (seq,\n" +
			"time, subject, headers, raw: the export format without hash), or republishes\n" +
			"them under another subject prefix, on the ledger's NATS or another server.\n" +
			"--since and --until take a sequence or an RFC 3339 time. --proposal ID adds the\n" +
			"events chained to it under other keys (folding the log into a temporary\n" +
			"projection to find them).",
		run: runReplay,
		ops: true,
	})
}

// runReplay is `ledger replay`: the log's original envelopes, filtered
// (internal/ops/replay), as JSON lines on stdout (seq, time, subject, headers,
// raw: the export format without hash), or republished under another
// subject prefix, on the ledger's NATS or another server.
//
// --since/--until take a sequence or an RFC 3339 time. --proposal ID
// (in --space, default "default") adds the events chained to it under
// other keys, found in its history: the command folds the log into a
// temporary projection for that.
func runReplay(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	var (
		o                                  opsFlags
		since, until, space, typ, proposal string
		prefix, target, tmp                string
		useJS                              bool
	)
	fl := newFlags(commands["replay"], e)
	fl.str(&since, "since", "SEQ|TIME", "", "first sequence, or earliest time (RFC 3339)", false)
	fl.str(&until, "until", "SEQ|TIME", "", "last sequence, or latest time (RFC 3339)", false)
	fl.str(&space, "space", "NAME", "", "only this space (default: all; with --proposal: default)", false)
	fl.str(&typ, "type", "TYPE", "", "only this event type (proposal, withdraw, reject, fulfil, response, note, approve, expire)", false)
	fl.str(&proposal, "proposal", "ID", "", "only this proposal and the events chained to it", false)
	fl.str(&prefix, "republish-to", "PREFIX", "", "republish under this subject prefix instead of printing (ledger.<space>... becomes PREFIX.<space>...)", false)
	fl.str(&target, "republish-url", "URL", "", "NATS URL to republish to (default: the ledger's NATS)", false)
	fl.boolean(&useJS, "republish-js", false, "republish with JetStream and wait for each acknowledgement (a stream must bind PREFIX.>)", false)
	fl.str(&tmp, "tmp", "DIR", "", "directory for the temporary projection of --proposal", false)
	o.register(fl)
	if err := fl.parseNone(args); err != nil {
		return err
	}
	f := replay.Filter{Space: space, Type: typ, Proposal: proposal}
	var err error
	if f.SinceSeq, f.Since, err = parseSeqOrTime(since); err != nil {
		return usageError("--since: %v", err)
	}
	if f.UntilSeq, f.Until, err = parseSeqOrTime(until); err != nil {
		return usageError("--until: %v", err)
	}
	if f.Proposal != "" && f.Space == "" {
		f.Space = ledger.DefaultSpace
	}
	if prefix == "" && (target != "" || useJS) {
		return usageError("--republish-url and --republish-js need --republish-to")
	}
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	c, err := o.connect(ctx, "replay", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	folder, err := o.folder(log)
	if err != nil {
		return err
	}

	if f.Proposal != "" {
		_, last, _, err := archive.StreamRange(ctx, c.js)
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		if last > 0 {
			v, err := repair.At(ctx, c.js, repair.Point{Seq: last}, repair.Options{TempDir: tmp, Folder: folder})
			if err != nil {
				return fmt.Errorf("history of %q: %w", f.Proposal, err)
			}
			defer v.Close()
			f.Histories = v
		} else {
			f.Histories = noHistory{}
		}
	}

	if prefix == "" {
		w := bufio.NewWriterSize(stdout, 1<<16)
		_, err := replay.Read(ctx, c.js, f, replay.JSONWriter(w))
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		return nil
	}

	nc := c.nc
	if target != "" {
		if nc, err = nats.Connect(target, nats.Name("ledger replay"), nats.Timeout(5*time.Second)); err != nil {
			return fmt.Errorf("connect to %s: %w", target, err)
		}
		defer nc.Close()
	}
	rp, err := replay.NewRepublisher(nc, prefix, useJS)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	info, err := replay.Read(ctx, c.js, f, rp.Func(ctx))
	if err == nil {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = rp.Flush(fctx)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("after %d messages: %w", rp.Published(), err)
	}
	fmt.Fprintf(stderr, "republished %d messages under %s (log at seq %d)\n", rp.Published(), prefix, info.LastSeq)
	return nil
}

// noHistory is the history source of an empty log.
type noHistory struct{}

func (noHistory) History(string, string) ([]api.HistoryEntry, error) {
	return nil, projections.ErrNotFound
}
