package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/blockfile"
	"github.com/mewledger/ledger/subjects"
)

// A record lost above the projection's checkpoint (stored, not folded
// yet, then its block damaged while the ledger is stopped): the projector
// neither fails nor skips it; the projection is held at the last good
// sequence, the damage is named (missing), /readyz is 503, /v1/status
// says where the projection is held and why, nothing is signed past it;
// once the record is back (the stream restored from a backup) the
// projection resumes by itself, with no restart.
func TestProjectionHeldOnMissingSeq(t *testing.T) {
	const folded, n, bad = 30, 40, 35
	o := scrubOptions(t)
	a := apptest.StartWith(t, o)
	appendN(t, a, 1, folded)
	waitCond(t, "the first appends folded and signed", func() bool {
		e, ok := a.Proofs().Log().Latest()
		return status(t, a).ProjectedSeq == folded && ok && e.Checkpoint.Size == folded
	})
	a.Projector().Pause()
	appendN(t, a, folded+1, n-folded)
	waitCond(t, "the later appends stored", func() bool { return status(t, a).StreamSeq == n })
	if st := status(t, a); st.ProjectedSeq != folded {
		t.Fatalf("folded %d with the projector paused, want %d", st.ProjectedSeq, folded)
	}
	backup := takeBackup(t, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := blockfile.FlipByte(o.NATSDir(), subjects.StreamName, bad); err != nil {
		t.Fatal(err)
	}

	a = apptest.StartWith(t, o)
	var ready api.Ready
	waitCond(t, "/readyz 503 log_damaged", func() bool {
		code, _, _ := getJSON(t, a.HTTPURL()+"/readyz", &ready)
		return code == http.StatusServiceUnavailable && ready.Error != nil && ready.Error.Code == api.CodeLogDamaged
	})
	waitCond(t, "the projection held at the last good sequence", func() bool {
		st := status(t, a)
		return st.ProjectionHeld != nil && st.ProjectedSeq == bad-1
	})
	st := status(t, a)
	t.Logf("/v1/status: projected %d, held %+v, damage %+v, signing %+v", st.ProjectedSeq, st.ProjectionHeld, st.LogDamage, st.SigningStopped)
	if h := st.ProjectionHeld; h.Seq != bad-1 || h.Missing != bad || !strings.Contains(h.Reason, fmt.Sprintf("seq %d is missing", bad)) {
		t.Fatalf("projection_held %+v, want held at %d on %d", h, bad-1, bad)
	}
	if d := st.LogDamage; d == nil || d.Kind != api.DamageMissing || d.Seq != bad || !strings.Contains(st.LogProblem, fmt.Sprintf("seq %d is missing", bad)) {
		t.Fatalf("log_damage %+v, log_problem %q: want missing at %d", d, st.LogProblem, bad)
	}
	// Nothing folded or signed past the hole, and reads go on, marked.
	code, hdr, body := getJSON(t, a.HTTPURL()+"/v1/proposals/scrub-3", nil)
	if code != http.StatusOK || hdr.Get(api.HeaderLogDamaged) == "" {
		t.Fatalf("read on a held projection: %d %v %s", code, hdr, body)
	}
	if st := status(t, a); st.ProjectedSeq != bad-1 {
		t.Fatalf("projected %d past the hole at %d", st.ProjectedSeq, bad)
	}
	if e, _ := a.Proofs().Log().Latest(); e.Checkpoint.Size >= bad {
		t.Fatalf("signed size %d past the hole at %d", e.Checkpoint.Size, bad)
	}

	// The stream restored from the backup while serving: the projection
	// resumes and folds everything, the damage clears, signing catches
	// up, with no restart.
	restoreBackup(t, a, backup)
	waitCond(t, "/readyz 200 after the repair", func() bool {
		code, _, _ := getJSON(t, a.HTTPURL()+"/readyz", &ready)
		return code == http.StatusOK
	})
	waitCond(t, "everything folded and signed", func() bool {
		e, _ := a.Proofs().Log().Latest()
		return status(t, a).ProjectedSeq == n && e.Checkpoint.Size == n
	})
	waitCond(t, "signing resumed", func() bool { return status(t, a).SigningStopped == nil })
	if st := status(t, a); st.ProjectionHeld != nil || st.LogDamage != nil || st.SigningStopped != nil {
		t.Fatalf("after the repair: held %+v damage %+v signing %+v", st.ProjectionHeld, st.LogDamage, st.SigningStopped)
	}
}
