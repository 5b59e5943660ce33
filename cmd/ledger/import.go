package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/mewledger/ledger/internal/archive"
	"github.com/mewledger/ledger/ledger"
)

// opsStdin is what `ledger import -f -` reads (a variable for tests).
var opsStdin io.Reader = os.Stdin

// runImport is `ledger import`: verify an export's chain, then write it
// into the ledger (internal/archive.Import). The LEDGER stream is created
// when missing. Without --append the ledger must be empty, and sequences
// and times are reproduced exactly. The result goes to stdout as JSON.
func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opsFlags
	fs := newOpsFlagSet("import", stdout, "import [-f FILE] [--append] [--data DIR | --nats-url URL]")
	file := fs.String("f", "-", "export file to import (- for stdin)")
	appendTo := fs.Bool("append", false, "append to a non-empty ledger (sequences are offset)")
	force := fs.Bool("force", false, "import even while consumers of the stream are active (a running projector would fold imported messages with the wrong times)")
	replicas := fs.Int("replicas", 1, "replicas of the LEDGER stream when the import creates it")
	batch := fs.Int("batch", archive.DefaultImportBatch, "messages per batch (and per import-marker update)")
	o.register(fs.FlagSet, stderr)
	if err := fs.parse(args, false); err != nil {
		return err
	}
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	in := opsStdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		defer f.Close()
		in = f
	}
	c, err := o.connect(ctx, "import", log, true)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	if _, err := ledger.EnsureStream(ctx, c.js, ledger.StreamOptions{Replicas: *replicas}); err != nil {
		return fmt.Errorf("%w", err)
	}
	rep, err := o.reporter(stderr, log, "import", "events")
	if err != nil {
		return err
	}
	res, err := archive.Import(ctx, c.js, in, archive.ImportOptions{Append: *appendTo, AllowActiveConsumers: *force, BatchSize: *batch, Progress: rep.Func()})
	rep.Finish(err)
	if err != nil {
		if res.Imported > 0 {
			fmt.Fprintf(stderr, "imported %d messages (stream seq %d..%d) before the failure; the import marker covers exactly those\n", res.Imported, res.FirstSeq, res.LastSeq)
		}
		return fmt.Errorf("%w", err)
	}
	return writeOpsJSON(stdout, res)
}
