package main

import (
	"context"
	"fmt"
	"os"

	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/ledger/appendlog"
)

func init() {
	register(&command{
		name:     "import",
		synopsis: "import [-f FILE] [--append] [--data DIR | --nats-url URL]",
		short:    "append an exported log into a ledger",
		help: "Verifies an export's hash chain (from -f FILE, or stdin), then writes it into\n" +
			"the ledger, creating the LEDGER stream when missing. Without --append the\n" +
			"ledger must be empty, and sequences and times are reproduced exactly. The\n" +
			"result goes to stdout as JSON. Bridge marks keep their seals, which verify only\n" +
			"under the key that made them: copy the source's <data>/bridge-mark.key into the\n" +
			"new data directory first, or add its key line to the new ledger's.",
		run: runImport,
		ops: true,
	})
}

// runImport is `ledger import`: verify an export's chain, then write it
// into the ledger (internal/ops/archive.Import). The LEDGER stream is created
// when missing. Without --append the ledger must be empty, and sequences
// and times are reproduced exactly. The result goes to stdout as JSON.
// -f - (the default) reads e.stdin.
func runImport(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	var (
		o               opsFlags
		file            string
		appendTo, force bool
		replicas, batch int
	)
	f := newFlags(commands["import"], e)
	f.str(&file, "file", "FILE", "-", "export file to import (- for stdin)", false)
	f.short("f", "file")
	f.boolean(&appendTo, "append", false, "append to a non-empty ledger (sequences are offset)", false)
	f.boolean(&force, "force", false, "import even while consumers of the stream are active (a running projector would fold imported messages with the wrong times)", false)
	f.integer(&replicas, "replicas", "N", 1, "replicas of the LEDGER stream when the import creates it", false)
	f.integer(&batch, "batch", "N", archive.DefaultImportBatch, "messages per batch (and per import-marker update)", false)
	o.register(f)
	if err := f.parseNone(args); err != nil {
		return err
	}
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	in := e.stdin
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		defer fh.Close()
		in = fh
	}
	c, err := o.connect(ctx, "import", log, true)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	if _, err := appendlog.EnsureStream(ctx, c.js, appendlog.StreamOptions{Replicas: replicas}); err != nil {
		return fmt.Errorf("%w", err)
	}
	rep, err := o.reporter(stderr, log, "import", "events")
	if err != nil {
		return err
	}
	res, err := archive.Import(ctx, c.js, in, archive.ImportOptions{Append: appendTo, AllowActiveConsumers: force, BatchSize: batch, Progress: rep.Func()})
	rep.Finish(err)
	if err != nil {
		if res.Imported > 0 {
			fmt.Fprintf(stderr, "imported %d messages (stream seq %d..%d) before the failure; the import marker covers exactly those\n", res.Imported, res.FirstSeq, res.LastSeq)
		}
		return fmt.Errorf("%w", err)
	}
	return writeOpsJSON(stdout, res)
}
