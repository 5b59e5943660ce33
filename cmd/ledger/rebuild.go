package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/repair"
)

func init() {
	register(&command{
		name:     "rebuild",
		synopsis: "rebuild [--api URL [--token T]] | rebuild --data DIR [--nats-url URL]",
		short:    "drop the projection and fold the stream again from sequence 1",
		help: "Online, through a running ledger's API (role ops): with --api, when a `ledger\n" +
			"serve` runs on --data, or when no --data is given and the default data directory\n" +
			"holds no ledger. The server folds the log into a new projection while it keeps\n" +
			"answering, then swaps; the command follows the rebuild until it ends.\n" +
			"Offline on --data otherwise: it folds the whole log into <data>/projection.new,\n" +
			"then exchanges it with <data>/projection. An explicit --data beats LEDGER_API.\n" +
			"Either way the fold verifies bridge marks with <data>/bridge-mark.key: keep it\n" +
			"with the data (without it no bridge mark is honoured; the log is intact).",
		run: runRebuild,
		ops: true,
	})
}

// runRebuild is `ledger rebuild`:
//
//   - online, through a running ledger's API (POST /v1/ops/rebuild, role
//     ops): with --api, when a `ledger serve` runs on --data, or when no
//     --data is given and the default data directory holds no ledger. The
//     service folds the log into a new projection while it keeps
//     answering, then swaps; the command follows the rebuild's progress
//     (GET /v1/ops/rebuild) until it ends;
//   - offline on --data otherwise: it folds the whole log into
//     <data>/projection.new with a progress bar, then exchanges it with
//     <data>/projection atomically and deletes the old one
//     (repair.OfflineRebuild).
func runRebuild(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	var o opsFlags
	f := newFlags(commands["rebuild"], e)
	o.register(f)
	o.registerAPI(f)
	if err := f.parseNone(args); err != nil {
		return err
	}
	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	if apiURL, src := o.apiTarget(); apiURL != "" {
		o.announce(apiURL, src)
		return rebuildOnline(ctx, &o, apiURL, stdout, stderr, log)
	}
	if err := o.refuseIfServing(); err != nil {
		return fmt.Errorf("%w", err)
	}
	defer o.unlockData()
	c, err := o.connect(ctx, "rebuild", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	rep, err := o.reporter(stderr, log, "rebuild", "events")
	if err != nil {
		return err
	}
	folder, err := o.folder(log)
	if err != nil {
		return err
	}
	start := time.Now()
	seq, err := repair.OfflineRebuild(ctx, c.js, o.projectionDir(), repair.Options{Progress: rep.Func(), Logger: log, Folder: folder})
	rep.Finish(err)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	fmt.Fprintf(stdout, "rebuilt %s from the log up to seq %d in %v\n", o.projectionDir(), seq, time.Since(start).Round(time.Millisecond))
	return nil
}

// rebuildPoll is how often an online rebuild's status is read.
const rebuildPoll = 250 * time.Millisecond

// rebuildOnline starts an online rebuild (or follows the one running) and
// reports its progress until it ends.
func rebuildOnline(ctx context.Context, o *opsFlags, apiURL string, stdout, stderr io.Writer, log zerolog.Logger) error {
	cl, err := o.apiClient(apiURL)
	if err != nil {
		return err
	}
	rep, err := o.reporter(stderr, log, "rebuild (online)", "events")
	if err != nil {
		return err
	}
	st, err := cl.StartRebuild(ctx)
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == api.CodeBusy {
		if cur, serr := cl.RebuildStatus(ctx); serr == nil && cur.Running {
			fmt.Fprintf(stderr, "a rebuild is already running on %s (since %s); following it\n", apiURL, cur.StartedAt.Format(time.RFC3339))
			st, err = cur, nil
		}
	}
	if err != nil {
		rep.Finish(err)
		return clientError(apiURL, err)
	}
	for st.Running {
		rep.Update(st.Seq, st.Target)
		select {
		case <-ctx.Done():
			rep.Finish(ctx.Err())
			return fmt.Errorf("stopped following the rebuild, which goes on in the server (GET %s/v1/ops/rebuild shows it): %w", cl.API(), ctx.Err())
		case <-time.After(rebuildPoll):
		}
		if st, err = cl.RebuildStatus(ctx); err != nil {
			rep.Finish(err)
			return clientError(apiURL, err)
		}
	}
	rep.Update(st.Seq, st.Target)
	if st.Phase == api.RebuildFailed {
		err := fmt.Errorf("the online rebuild failed; the old projection still serves: %s", st.Error)
		rep.Finish(err)
		return err
	}
	rep.Finish(nil)
	took := time.Duration(0)
	if st.StartedAt != nil && st.FinishedAt != nil {
		took = st.FinishedAt.Sub(*st.StartedAt).Round(time.Millisecond)
	}
	fmt.Fprintf(stdout, "rebuilt the projection of %s online up to seq %d in %v (%.0f events/s); it serves from the new projection\n",
		cl.API(), st.Seq, took, st.EventsPerSecond)
	return nil
}
