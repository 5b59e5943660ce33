package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mewledger/ledger/internal/repair"
)

// runRebuild is `ledger rebuild --data DIR`, offline: it folds the whole
// log into <data>/projection.new with a progress bar, then exchanges it
// with <data>/projection atomically and deletes the old one
// (repair.OfflineRebuild). `ledger serve` must be stopped; rebuilding
// while it keeps answering is the API's ops route (to be wired).
func runRebuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opsFlags
	fs := newOpsFlagSet("rebuild", stdout, "rebuild [--data DIR] [--nats-url URL]")
	o.register(fs.FlagSet)
	if err := fs.parse(args, false); err != nil {
		return err
	}
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	if err := o.refuseIfServing(); err != nil {
		return fmt.Errorf("%w", err)
	}
	c, err := o.connect(ctx, "rebuild", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	rep, err := o.reporter(stderr, log, "rebuild", "events")
	if err != nil {
		return err
	}
	start := time.Now()
	seq, err := repair.OfflineRebuild(ctx, c.js, o.projectionDir(), repair.Options{Progress: rep.Func()})
	rep.Finish(err)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	fmt.Fprintf(stdout, "rebuilt %s from the log up to seq %d in %v\n", o.projectionDir(), seq, time.Since(start).Round(time.Millisecond))
	return nil
}
