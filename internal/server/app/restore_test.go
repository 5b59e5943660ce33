package app_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/blockfile"
	"github.com/mewledger/ledger/internal/testkit/streambackup"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// takeBackup snapshots the LEDGER stream of a serving ledger, as `nats
// stream backup` does.
func takeBackup(t *testing.T, a *app.App) *streambackup.Snapshot {
	t.Helper()
	snap, err := streambackup.Take(testctx.Context(t), a.Conn(), subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// restoreBackup deletes the LEDGER stream of a serving ledger and
// restores it from snap, as `nats stream rm` and `nats stream restore` do.
func restoreBackup(t *testing.T, a *app.App, snap *streambackup.Snapshot) {
	t.Helper()
	ctx := testctx.Context(t)
	if err := a.JetStream().DeleteStream(ctx, subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	if err := streambackup.Restore(ctx, a.Conn(), snap); err != nil {
		t.Fatal(err)
	}
}

// damagedLedger fills a ledger with n proposals, keeps what keep takes of
// it while it serves (a backup, an export), stops it, damages seq bad with
// damage and starts it again; it returns the ledger once the damage is
// named and /readyz is 503, with what keep took.
func damagedLedger[T any](t *testing.T, n int, bad uint64, kind string, keep func(*app.App) T, damage func(store string) error) (*app.App, T) {
	t.Helper()
	o := scrubOptions(t)
	a := apptest.StartWith(t, o)
	fillScrubbed(t, a, n)
	kept := keep(a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := damage(o.NATSDir()); err != nil {
		t.Fatal(err)
	}
	a = apptest.StartWith(t, o)
	waitCond(t, "the damage named", func() bool {
		d, ok := a.LogDamage()
		return ok && d.Kind == kind && d.Seq == bad
	})
	var ready api.Ready
	if code, _, body := getJSON(t, a.HTTPURL()+"/readyz", &ready); code != http.StatusServiceUnavailable || ready.Error == nil || ready.Error.Code != api.CodeLogDamaged {
		t.Fatalf("/readyz on a damaged log: %d %s", code, body)
	}
	return a, kept
}

// waitRepaired waits for a repaired ledger to be ready again with the
// damage gone, and checks the damaged proposal's proof is served.
func waitRepaired(t *testing.T, a *app.App, n int, bad uint64) {
	t.Helper()
	waitCond(t, "/readyz 200 after the restore", func() bool {
		code, _, _ := getJSON(t, a.HTTPURL()+"/readyz", nil)
		return code == http.StatusOK
	})
	// The signer notices the damage cleared at its next interval.
	waitCond(t, "signing resumed", func() bool { return status(t, a).SigningStopped == nil })
	st := status(t, a)
	if st.LogDamage != nil || st.LogProblem != "" || st.SigningStopped != nil || st.ProjectionHeld != nil {
		t.Fatalf("after the restore: problem %q damage %+v signing %+v held %+v", st.LogProblem, st.LogDamage, st.SigningStopped, st.ProjectionHeld)
	}
	if code, _, body := getJSON(t, a.HTTPURL()+fmt.Sprintf("/v1/proposals/scrub-%d/proof", bad), nil); code != 200 {
		t.Fatalf("proof of the repaired proposal: %d %s", code, body)
	}
	// Folding and signing go on.
	appendN(t, a, 500, 2)
	waitCond(t, "the next appends folded and signed", func() bool {
		e, _ := a.Proofs().Log().Latest()
		return status(t, a).ProjectedSeq == uint64(n+2) && e.Checkpoint.Size == int64(n+2)
	})
}

// A stream with an altered message, restored while the ledger serves from
// a JetStream snapshot taken before the damage: the restored stream keeps
// its identity and holds the same leaves up to the checkpoint, so the
// ledger is ready again with no restart; nothing was signed meanwhile.
func TestRestoreFromSnapshotWhileServing(t *testing.T) {
	const n, bad = 30, 17
	a, backup := damagedLedger(t, n, bad, api.DamageAltered, func(a *app.App) *streambackup.Snapshot { return takeBackup(t, a) },
		func(store string) error {
			return blockfile.Rewrite(store, subjects.StreamName, bad, func(b []byte) []byte {
				return bytes.Replace(b, []byte("/tmp/f17"), []byte("/etc/pwd"), 1)
			})
		})
	before, _ := a.Proofs().Log().Latest()
	restoreBackup(t, a, backup)
	waitRepaired(t, a, n, bad)
	if before.Checkpoint.Size != n {
		t.Fatalf("signed size %d while damaged, want %d (signed before the damage)", before.Checkpoint.Size, n)
	}
}

// A stream with a missing message, repaired while the ledger serves by
// deleting it and `ledger import` of an export taken before the damage:
// the recreated stream holds the same leaves up to the checkpoint, so
// the ledger binds to it and is ready again with no restart. The import
// needs no --force: the held projector reads nothing meanwhile.
func TestRestoreFromExportWhileServing(t *testing.T) {
	const n, bad = 30, 17
	a, export := damagedLedger(t, n, bad, api.DamageMissing, func(a *app.App) []byte {
		var buf bytes.Buffer
		if _, err := archive.Export(testctx.Context(t), a.JetStream(), &buf, archive.ExportOptions{}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}, func(store string) error { return blockfile.FlipByte(store, subjects.StreamName, bad) })
	ctx := testctx.Context(t)
	js := a.JetStream()
	if err := js.DeleteStream(ctx, subjects.StreamName); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the missing stream named", func() bool { return a.LogProblem() != "" && a.Projector().Paused() })
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := archive.Import(ctx, js, bytes.NewReader(export), archive.ImportOptions{}); err != nil {
		t.Fatalf("import: %v (%+v)", err, res)
	}
	if st := status(t, a); st.ProjectedSeq != n {
		t.Fatalf("projected %d during the repair, want %d", st.ProjectedSeq, n)
	}
	waitRepaired(t, a, n, bad)
}
