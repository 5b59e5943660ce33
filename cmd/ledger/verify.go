package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mewledger/ledger/internal/archive"
	"github.com/mewledger/ledger/internal/repair"
	"github.com/mewledger/ledger/projections"
)

// errHeadMismatch: an export's head hash is not the one kept apart.
var errHeadMismatch = errors.New("head hash mismatch")

// runVerify is `ledger verify`:
//
//   - --export FILE checks an export's hash chain and prints its summary
//     (with the head hash); the error names the first bad line; with
//     --head H the head hash must also equal H, kept from `ledger export`
//     apart from the file;
//   - otherwise it folds the log into a temporary store up to the live
//     projection's checkpoint and compares the two, reporting the first
//     difference and the proposal it concerns: online through a running
//     ledger's API (POST /v1/ops/verify, role ops; the projector is paused
//     meanwhile) with --api, when a `ledger serve` runs on --data, or when
//     no --data is given and the default data directory holds no ledger;
//     else offline on <data>/projection.
//
// The result goes to stdout as JSON; a mismatch is also an error.
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o opsFlags
	fs := newOpsFlagSet("verify", stdout, "verify --export FILE [--head HASH] | verify [--api URL [--token T]] | verify --data DIR [--nats-url URL]")
	export := fs.String("export", "", "check the hash chain of an export file (- for stdin)")
	head := fs.String("head", "", "with --export: the head hash `ledger export` reported, kept apart from the file; the file's must equal it (a chain recomputed after an edit verifies by itself, never against a head kept elsewhere)")
	tmp := fs.String("tmp", "", "directory for the temporary projection (default: the system's)")
	o.register(fs.FlagSet, stderr)
	o.registerAPI(fs.FlagSet)
	if err := fs.parse(args, false); err != nil {
		return err
	}
	if *head != "" && *export == "" {
		return opsUsage("--head goes with --export")
	}
	if *export != "" {
		in := opsStdin
		if *export != "-" {
			f, err := os.Open(*export)
			if err != nil {
				return fmt.Errorf("%w", err)
			}
			defer f.Close()
			in = f
		}
		sum, err := archive.VerifyChain(in)
		if err != nil {
			return fmt.Errorf("%s: %w (the %d lines before it verify)", *export, err, sum.Lines)
		}
		if *head != "" && !strings.EqualFold(strings.TrimSpace(*head), sum.Head) {
			_ = writeOpsJSON(stdout, struct {
				OK bool `json:"ok"`
				archive.Summary
				WantHead string `json:"want_head"`
			}{false, sum, *head})
			return fmt.Errorf("%s: %w: its head hash is %s, not the %s kept from the export: the file was changed (and its chain recomputed) or is another export",
				*export, errHeadMismatch, sum.Head, *head)
		}
		return writeOpsJSON(stdout, struct {
			OK bool `json:"ok"`
			archive.Summary
		}{true, sum})
	}

	log, err := o.logger(stderr)
	if err != nil {
		return err
	}
	if api, src := o.apiTarget(); api != "" {
		o.announce(api, src)
		return verifyOnline(ctx, &o, api, stdout)
	}
	if err := o.refuseIfServing(); err != nil {
		return fmt.Errorf("%w", err)
	}
	defer o.unlockData()
	dir := o.projectionDir()
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no projection to verify: %w", err)
	}
	live, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		return fmt.Errorf("%w (is `ledger serve` running on %s?)", err, o.data)
	}
	defer live.Close()
	c, err := o.connect(ctx, "verify", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	rep, err := o.reporter(stderr, log, "verify: rebuild", "events")
	if err != nil {
		return err
	}
	res, err := repair.Verify(ctx, c.js, live, repair.Options{TempDir: *tmp, Progress: rep.Func()})
	rep.Finish(err)
	if err != nil && !errors.Is(err, repair.ErrMismatch) {
		return fmt.Errorf("%w", err)
	}
	out := struct {
		OK bool `json:"ok"`
		repair.VerifyResult
	}{err == nil, res}
	if werr := writeOpsJSON(stdout, out); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	return nil
}

// verifyOnline runs POST /v1/ops/verify and prints its result.
func verifyOnline(ctx context.Context, o *opsFlags, api string, stdout io.Writer) error {
	cl, err := o.apiClient(api)
	if err != nil {
		return err
	}
	res, err := cl.Verify(ctx)
	if err != nil {
		return clientError(api, err)
	}
	if err := writeOpsJSON(stdout, res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("%w: %s", repair.ErrMismatch, res.Message)
	}
	return nil
}
