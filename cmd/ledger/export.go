package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mewledger/ledger/internal/ops/archive"
)

func init() {
	register(&command{
		name:     "export",
		synopsis: "export [-f FILE] [-o jsonl] [--from-seq N] [--to-seq N] [--data DIR | --nats-url URL]",
		short:    "write the log as JSON lines with sequence, time, subject and hash chain",
		help: "Writes the log as hash-chained JSON lines (sequence, time, subject, headers,\n" +
			"the original envelope, hash), to stdout or to -f FILE, written atomically\n" +
			"(FILE.partial, renamed when complete). The summary, with the head hash to keep\n" +
			"apart from the file, goes to stderr: `ledger verify --export FILE --head HASH`\n" +
			"checks the file against it. An export never hides a hole: a log with a\n" +
			"missing sequence is refused (exit 1, naming it) unless --allow-gaps, and then\n" +
			"the file and the summary name every missing sequence.",
		run: runExport,
		ops: true,
	})
}

// runExport is `ledger export`: the log as hash-chained JSON lines
// (internal/ops/archive), to stdout or to a file written atomically (FILE.partial,
// renamed when complete, so a cut-off export never has the final name).
// The summary, with the head hash to keep alongside the file, goes to
// stderr.
func runExport(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	var (
		o         opsFlags
		out       string
		format    string
		from, to  uint64
		allowGaps bool
	)
	f := newFlags(commands["export"], e)
	f.str(&out, "file", "FILE", "-", "output file, written atomically (- for stdout)", false)
	f.short("f", "file")
	f.str(&format, "output", "jsonl", "jsonl", "output format: jsonl, the only one (as everywhere, -o is a format, not a file)", false)
	f.short("o", "output")
	f.u64(&from, "from-seq", "N", 0, "first sequence (default: the first)", false)
	f.u64(&to, "to-seq", "N", 0, "last sequence (default: the last when the export starts)", false)
	f.boolean(&allowGaps, "allow-gaps", false, "export a log with missing sequences: each line after a hole names it (missing_before) and the summary lists them (without it such a log is refused, naming the first)", false)
	o.register(f)
	if err := f.parseNone(args); err != nil {
		return err
	}
	if format != "jsonl" {
		return usageError("-o %q: the only export format is jsonl (-o is a format everywhere; write to a file with -f FILE)", format)
	}
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	c, err := o.connect(ctx, "export", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()

	w, finish := stdout, func(error) error { return nil }
	if out != "-" {
		f, err := os.Create(out + ".partial")
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		w = f
		finish = func(failed error) error {
			err := f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if failed == nil && err == nil {
				err = os.Rename(f.Name(), out)
			}
			if failed != nil || err != nil {
				_ = os.Remove(f.Name())
			}
			return err
		}
	}
	rep, err := o.reporter(stderr, log, "export", "events")
	if err != nil {
		return err
	}
	sum, err := archive.Export(ctx, c.js, w, archive.ExportOptions{FromSeq: from, ToSeq: to, Progress: rep.Func(), AllowGaps: allowGaps})
	rep.Finish(err)
	if ferr := finish(err); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	dest := "stdout"
	if out != "-" {
		dest, _ = filepath.Abs(out)
	}
	fmt.Fprintf(stderr, "exported %d messages (seq %d..%d) to %s\nhead hash %s (keep it apart from the file: `ledger verify --export FILE --head %s` checks the file against it)\n",
		sum.Lines, sum.FirstSeq, sum.LastSeq, dest, sum.Head, sum.Head)
	if len(sum.Missing) > 0 {
		fmt.Fprintf(stderr, "MISSING from the log, and so from the file: %s (each line after a hole names it in missing_before)\n", rangesString(sum.Missing))
	}
	if sum.TreeRoot != "" {
		fmt.Fprintf(stderr, "tree root %s of %d leaves (a signed checkpoint of %d leaves names it: `ledger verify --export FILE --checkpoint NOTE --key KEY` checks the file against one)\n",
			sum.TreeRoot, sum.Lines, sum.Lines)
	}
	return nil
}
