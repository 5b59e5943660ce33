package monitor_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/monitor"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/witness"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/witnesskit"
)

// TestWitnessedMonitor: a ledger with two real litewitness (quorum 2); a
// monitor requiring both follows the witnessed checkpoints and reports
// their cosigners. A fork signed with the ledger's own key is refused by
// both witnesses (it never gets a witnessed checkpoint), and the monitor,
// reading the fork's latest signed checkpoint beside the witnessed one,
// reports it; a monitor requiring a witness that never cosigned refuses
// the honest checkpoint (no quorum).
func TestWitnessedMonitor(t *testing.T) {
	key, vkey := keyFile(t)
	w1 := witnesskit.Start(t, "witness.example/one", origin, vkey)
	w2 := witnesskit.Start(t, "witness.example/two", origin, vkey)
	var ws []witness.Witness
	for _, w := range []*witnesskit.Witness{w1, w2} {
		p, err := witness.Parse(w.Flag())
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, p)
	}
	withWitnesses := func(o *app.Options) {
		o.CheckpointInterval = 20 * time.Millisecond
		o.CheckpointKeyFile = key
		o.Witnesses = ws
		o.WitnessQuorum = 2
		o.WitnessBackoff = 50 * time.Millisecond
	}
	honest := apptest.Start(t, withWitnesses)
	last := appendN(t, honest, "a", 300)
	waitWitnessed(t, honest, last)
	required, err := evidence.ParseWitnesses([]string{w1.VKey, w2.VKey}, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	openW := func(url string, w evidence.Witnesses) *monitor.Monitor {
		m, err := monitor.Open(context.Background(), monitor.Options{URL: url, VerifierKey: vkey, Witnesses: w, StateDir: dir, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m := openW(honest.HTTPURL(), required)
	res, err := check(t, m)
	if err != nil || res.Size < int64(last) || !slices.Equal(res.Cosigners, []string{"witness.example/one", "witness.example/two"}) {
		t.Fatalf("witnessed check: %+v %v", res, err)
	}
	accepted := res.Size
	m.Close()

	// A witness that never cosigned: the quorum is not met.
	stranger, err := evidence.ParseWitnesses([]string{w1.VKey, witnesskit.NewKey(t, "witness.example/stranger")}, 2)
	if err != nil {
		t.Fatal(err)
	}
	m = openW(honest.HTTPURL(), stranger)
	if _, err := check(t, m); !errors.Is(err, monitor.ErrBadCheckpoint) || !errors.Is(err, evidence.ErrNoQuorum) {
		t.Fatalf("with a witness that never cosigned: %v, want ErrBadCheckpoint and ErrNoQuorum", err)
	}
	m.Close()

	// The fork: the same key, another longer history; the witnesses
	// refuse it, the monitor reports it.
	fork := apptest.Start(t, withWitnesses)
	forkLast := appendN(t, fork, "mallory", int(accepted)+50)
	waitFor(t, "both witnesses refusing the fork", func() bool {
		st := fork.Witnesses().Status()
		return len(st) == 2 && st[0].Alarm != "" && st[1].Alarm != ""
	})
	waitSigned(t, fork, forkLast)
	m = openW(fork.HTTPURL(), required)
	mustFind(t, m, monitor.ErrFork, accepted, int64(forkLast))
	if _, ok := fork.Proofs().Log().Witnessed(); ok {
		t.Fatal("the fork holds a witnessed checkpoint")
	}
}

func waitWitnessed(t *testing.T, a *app.App, size uint64) {
	t.Helper()
	waitFor(t, "a witnessed checkpoint", func() bool {
		e, ok := a.Proofs().Log().Witnessed()
		return ok && e.Checkpoint.Size >= int64(size)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 90s, not %s", what)
		}
	}
}
