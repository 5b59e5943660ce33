package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/projections"
)

// errHeadMismatch: an export's head hash is not the one kept apart.
var errHeadMismatch = errors.New("head hash mismatch")

func init() {
	register(&command{
		name:     "verify",
		synopsis: "verify --bundle FILE --key KEY | verify --export FILE [--head HASH | --checkpoint NOTE --key KEY] | verify [--api URL [--token T]] | verify --data DIR [--nats-url URL] | verify --scrub --data DIR",
		short:    "check an evidence bundle; rebuild into a temporary store and compare; check an export's hash chain",
		help: "With --bundle FILE --key KEY: checks an evidence bundle (`ledger proof`) with\n" +
			"nothing but the ledger's verifier key (the key, or a file holding it): the\n" +
			"checkpoint's signature, each event's leaf encoding, that its fields are its\n" +
			"leaf's, and its inclusion proof; no server, no data directory. A failure names\n" +
			"its kind (signature, inclusion, leaf_encoding, mismatch) and the event's seq.\n" +
			"With --export FILE (- for stdin): checks an export's hash chain and prints its\n" +
			"summary (tree_root: the Merkle root of its lines, when it starts at seq 1);\n" +
			"with --checkpoint NOTE --key KEY also that its first lines are the tree the\n" +
			"signed checkpoint names (the chain alone is no evidence: anyone can recompute\n" +
			"it); --head HASH, kept from `ledger export` apart from the file, must equal the\n" +
			"file's head. Otherwise: folds the log into a temporary store up to the live\n" +
			"projection's checkpoint and compares the two (records, indexes and the\n" +
			"Merkle tree's stored hashes), naming the first difference;\n" +
			"online through the API (role ops) as rebuild chooses it, else offline on\n" +
			"<data>/projection. With --scrub: one full pass of the scrub `ledger serve`\n" +
			"runs, offline on --data: every stored message is read again and its leaf hash\n" +
			"compared with the projection's Merkle tree; a missing or altered message is\n" +
			"ok:false naming its kind, seq and both leaf hashes.\n" +
			"The result goes to stdout as JSON; a mismatch exits 1.",
		run: runVerify,
		ops: true,
	})
}

// runVerify is `ledger verify`:
//
//   - --export FILE checks an export's hash chain and prints its summary
//     (with the head hash); the error names the first bad line; with
//     --head H the head hash must also equal H, kept from `ledger export`
//     apart from the file; --export - reads e.stdin;
//   - otherwise it folds the log into a temporary store up to the live
//     projection's checkpoint and compares the two, reporting the first
//     difference and the proposal it concerns: online through a running
//     ledger's API (POST /v1/ops/verify, role ops; the projector is paused
//     meanwhile) with --api, when a `ledger serve` runs on --data, or when
//     no --data is given and the default data directory holds no ledger;
//     else offline on <data>/projection.
//
// The result goes to stdout as JSON; a mismatch is also an error.
func runVerify(ctx context.Context, e env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	var (
		o                 opsFlags
		export, head, tmp string
		bundle, key       string
		checkpoint        string
		scrub             bool
	)
	f := newFlags(commands["verify"], e)
	f.str(&export, "export", "FILE", "", "check the hash chain of an export file (- for stdin)", false)
	f.str(&head, "head", "HASH", "", "with --export: the head hash ledger export reported, kept apart from the file; the file's must equal it (a chain recomputed after an edit verifies by itself, never against a head kept elsewhere)", false)
	f.str(&tmp, "tmp", "DIR", "", "directory for the temporary projection (default: the system's)", false)
	f.str(&bundle, "bundle", "FILE", "", "check an evidence bundle from `ledger proof` (- for stdin), offline", false)
	f.str(&key, "key", "KEY", "", "with --bundle or --checkpoint: the ledger's verifier key (`ledger checkpoint key`), or a file holding it", false)
	f.str(&checkpoint, "checkpoint", "FILE", "", "with --export: a signed checkpoint (`ledger checkpoint latest`) the file's first lines must be the tree of (needs --key)", false)
	f.boolean(&scrub, "scrub", false, "re-read the whole stream and check every message's leaf hash against the projection's Merkle tree (one full pass of the scrub `ledger serve` runs), offline on --data", false)
	var wf witnessFlags
	wf.register(f, false)
	o.register(f)
	o.registerAPI(f)
	if err := f.parseNone(args); err != nil {
		return err
	}
	if scrub {
		if export != "" || bundle != "" {
			return usageError("--scrub checks the data directory's log: not with --export or --bundle")
		}
		return verifyScrub(ctx, e, &o)
	}
	if len(wf.keys) > 0 && bundle == "" {
		return usageError("--witness-key goes with --bundle")
	}
	if key != "" && bundle == "" && checkpoint == "" {
		return usageError("--key goes with --bundle or --checkpoint")
	}
	if checkpoint != "" && (export == "" || key == "") {
		return usageError("--checkpoint goes with --export and --key")
	}
	if bundle != "" {
		if export != "" {
			return usageError("--bundle and --export are two different checks: give one")
		}
		w, err := wf.witnesses()
		if err != nil {
			return err
		}
		return verifyBundle(e, bundle, key, w)
	}
	if head != "" && export == "" {
		return usageError("--head goes with --export")
	}
	if export != "" {
		in := e.stdin
		if export != "-" {
			fh, err := os.Open(export)
			if err != nil {
				return fmt.Errorf("%w", err)
			}
			defer fh.Close()
			in = fh
		}
		if checkpoint != "" {
			return verifyExportCheckpoint(e, export, in, checkpoint, key)
		}
		sum, err := archive.VerifyChain(in)
		if err != nil {
			return fmt.Errorf("%s: %w (the %d lines before it verify)", export, err, sum.Lines)
		}
		if head != "" && !strings.EqualFold(strings.TrimSpace(head), sum.Head) {
			_ = writeOpsJSON(stdout, struct {
				OK bool `json:"ok"`
				archive.Summary
				WantHead string `json:"want_head"`
			}{false, sum, head})
			return fmt.Errorf("%s: %w: its head hash is %s, not the %s kept from the export: the file was changed (and its chain recomputed) or is another export",
				export, errHeadMismatch, sum.Head, head)
		}
		if !sum.Contiguous {
			// An export never hides a hole (contract §9): the chain of
			// a file with missing sequences verifies, the file is not
			// the whole log.
			_ = writeOpsJSON(stdout, struct {
				OK bool `json:"ok"`
				archive.Summary
			}{false, sum})
			return fmt.Errorf("%s: its chain verifies but it is not contiguous: %s missing", export, rangesString(sum.Missing))
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
	if apiURL, src := o.apiTarget(); apiURL != "" {
		o.announce(apiURL, src)
		return verifyOnline(ctx, &o, apiURL, stdout)
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
	folder, err := o.folder(log)
	if err != nil {
		return err
	}
	res, err := repair.Verify(ctx, c.js, live, repair.Options{TempDir: tmp, Progress: rep.Func(), Folder: folder})
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
func verifyOnline(ctx context.Context, o *opsFlags, apiURL string, stdout io.Writer) error {
	cl, err := o.apiClient(apiURL)
	if err != nil {
		return err
	}
	res, err := cl.Verify(ctx)
	if err != nil {
		return clientError(apiURL, err)
	}
	if err := writeOpsJSON(stdout, res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("%w: %s", repair.ErrMismatch, res.Message)
	}
	return nil
}

// rangesString lists sequence ranges for a message.
func rangesString(rs []archive.SeqRange) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ", ")
}

// verifyScrub is `ledger verify --scrub`: one full pass of the scrub,
// offline on the data directory: every stored message's leaf hash
// against the projection's tree. Damage is ok:false (exit 1) naming its
// kind, seq and both leaf hashes.
func verifyScrub(ctx context.Context, e env, o *opsFlags) error {
	log, err := o.logger(e.stderr)
	if err != nil {
		return err
	}
	if err := o.refuseIfServing(); err != nil {
		return fmt.Errorf("%w (the running ledger scrubs its log itself: see /v1/status's scrub)", err)
	}
	defer o.unlockData()
	dir := o.projectionDir()
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no projection to check the log against: %w", err)
	}
	live, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer live.Close()
	c, err := o.connect(ctx, "verify", log, false)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	defer c.Close()
	size := uint64(max(live.TreeSize(), 0))
	checked, d, err := integrity.CheckRange(ctx, c.js, live, 1, size, integrity.CheckOptions{Batch: 1024})
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	out := struct {
		OK       bool           `json:"ok"`
		TreeSize uint64         `json:"tree_size"`
		Checked  uint64         `json:"checked"`
		Damage   *api.LogDamage `json:"damage,omitempty"`
	}{d == nil, size, checked, d}
	if err := writeOpsJSON(e.stdout, out); err != nil {
		return err
	}
	if d != nil {
		return fmt.Errorf("%s (kind %s, seq %d)", d.Message, d.Kind, d.Seq)
	}
	return nil
}
