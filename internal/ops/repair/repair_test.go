package repair_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/internal/ops/replay"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// queried are the proposals whose answers are recorded.
var queried = []string{"ttl-exp", "ttl-late", "ttl-open", "chained", "chained-2", "p-12", "p-40", "p-77", "p-150"}

// answers records what a reader answers: Get of each queried proposal,
// its history length, the stats of both spaces and a List page.
func answers(t *testing.T, r interface {
	Get(space, id string) (*api.Proposal, error)
	History(space, key string) ([]api.HistoryEntry, error)
	Stats(space string) (*api.Stats, error)
	List(q projections.ListQuery) (projections.ListPage, error)
}) string {
	out := map[string]any{}
	for _, id := range queried {
		p, err := r.Get("default", id)
		if errors.Is(err, projections.ErrNotFound) {
			out["get "+id] = "not found"
		} else if err != nil {
			t.Fatal(err)
		} else {
			out["get "+id] = p
		}
		h, err := r.History("default", id)
		if err != nil && !errors.Is(err, projections.ErrNotFound) {
			t.Fatal(err)
		}
		out["history "+id] = h
	}
	for _, sp := range []string{"default", "other"} {
		st, err := r.Stats(sp)
		if err != nil {
			t.Fatal(err)
		}
		out["stats "+sp] = st
	}
	page, err := r.List(projections.ListQuery{Space: "default", State: api.StatePending, Limit: 25})
	if err != nil {
		t.Fatal(err)
	}
	out["list pending"] = page
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAtSeqEqualsLive: the live projector, folding one event per commit
// while traffic is appended, records its answers when it has applied
// exactly N; `at --seq N` (a temporary rebuild to N) answers the same.
func TestAtSeqEqualsLive(t *testing.T) {
	l := opsrig.New(t)
	live := opsrig.OpenStore(t, "")
	points := map[uint64]bool{1: true, 4: true, 9: true, 10: true, 60: true, 150: true, 260: true}
	var mu sync.Mutex
	recorded := map[uint64]string{}
	p, err := projector.New(l.JS, live, projector.Options{BatchSize: 1, OnBatch: func(b projections.BatchInfo) {
		if b.Events != 1 {
			t.Errorf("batch of %d events with BatchSize 1", b.Events)
		}
		mu.Lock()
		want := points[b.LastSeq]
		mu.Unlock()
		if want {
			a := answers(t, live)
			mu.Lock()
			recorded[b.LastSeq] = a
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()

	last := l.Traffic(t, 31, 250)
	mu.Lock()
	points[last] = true // the expiry, appended last
	mu.Unlock()
	if err := live.WaitApplied(ctx(t), last); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The last point is recorded after the fact (it was added late).
	recorded[last] = answers(t, live)

	for n := range points {
		want, ok := recorded[n]
		if !ok {
			t.Fatalf("no answers recorded at seq %d", n)
		}
		v, err := repair.At(ctx(t), l.JS, repair.Point{Seq: n}, repair.Options{TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		got := answers(t, v)
		if v.AppliedSeq() != n {
			t.Fatalf("view at seq %d applied %d", n, v.AppliedSeq())
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("at seq %d the rebuild answers differently:\nlive: %.600s\nat:   %.600s", n, want, got)
		}
	}

	// --time T: the state after every event up to the first one after T.
	var msgs []*replay.Message
	if _, err := replay.Read(ctx(t), l.JS, replay.Filter{}, func(m *replay.Message) error { msgs = append(msgs, m); return nil }); err != nil {
		t.Fatal(err)
	}
	T := msgs[149].Time
	var wantSeq uint64
	for _, m := range msgs {
		if m.Time.After(T) {
			break
		}
		wantSeq = m.Seq
	}
	v, err := repair.At(ctx(t), l.JS, repair.Point{Time: T}, repair.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v.AppliedSeq() != wantSeq || wantSeq < 150 {
		t.Fatalf("at time %v: applied %d, want %d", T, v.AppliedSeq(), wantSeq)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	// Beyond the log: clear errors.
	if _, err := repair.At(ctx(t), l.JS, repair.Point{Seq: last + 1}, repair.Options{}); !errors.Is(err, repair.ErrBeyondLog) {
		t.Fatalf("at seq last+1: %v", err)
	}
	if _, err := repair.At(ctx(t), l.JS, repair.Point{Time: time.Now().Add(time.Hour)}, repair.Options{}); !errors.Is(err, repair.ErrBeyondLog) {
		t.Fatalf("at a future time: %v", err)
	}
	if _, err := repair.At(ctx(t), l.JS, repair.Point{}, repair.Options{}); !errors.Is(err, repair.ErrNoPoint) {
		t.Fatalf("at nothing: %v", err)
	}
}

// TestVerify: a projection folded from the log verifies; one whose last
// event was folded from different bytes is reported, naming the proposal.
func TestVerify(t *testing.T) {
	l := opsrig.New(t)
	last := l.Traffic(t, 41, 200)
	good := l.Fold(t, 0)
	res, err := repair.Verify(ctx(t), l.JS, good, repair.Options{TempDir: t.TempDir()})
	if err != nil || res.Difference != nil || res.Seq != last {
		t.Fatalf("verify of a rebuilt projection: %+v %v", res, err)
	}
	if d, _ := good.Digest(); d != res.Digest {
		t.Fatalf("digest %s, want %s", res.Digest, d)
	}

	// A projection that folded something else at the last sequence.
	l.AppendOne(t, "", opsrig.Env("chained-2-rej-2", "fs-agent", "mcp/reject", []string{"chained-2"}, `{"reason":"policy"}`))
	bad := l.Fold(t, last)
	b := bad.NewBatch()
	forged := opsrig.Env("chained-2-rej-2", "fs-agent", "mcp/reject", []string{"chained-2"}, `{"reason":"unsafe"}`)
	ev := fold.Event{Seq: last + 1, Time: time.Now(), Subject: "ledger.default.chained-2.reject.fs-agent", Raw: []byte(forged)}
	if _, err := fold.NewFolder().Apply(b, ev); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(last + 1); err != nil {
		t.Fatal(err)
	}
	res, err = repair.Verify(ctx(t), l.JS, bad, repair.Options{})
	if !errors.Is(err, repair.ErrMismatch) || res.Difference == nil || res.Difference.Proposal != "chained-2" {
		t.Fatalf("verify of a forged projection: %+v %v", res, err)
	}
	t.Log(err)
}

// TestOfflineRebuild: the projection directory is replaced by a rebuild,
// atomically, with no leftovers; it also works when there was none.
func TestOfflineRebuild(t *testing.T) {
	l := opsrig.New(t)
	l.Traffic(t, 51, 150)
	data := t.TempDir()
	dir := filepath.Join(data, "projection")

	// A stale projection: folded only part of the log.
	old, err := projections.OpenStore(projections.StoreOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projector.Rebuild(ctx(t), l.JS, old, projector.RebuildOptions{UpToSeq: 20}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	// A leftover of an interrupted rebuild is cleared.
	if err := os.MkdirAll(dir+repair.NewDirSuffix, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir+repair.NewDirSuffix, "junk"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var progressed uint64
	seq, err := repair.OfflineRebuild(ctx(t), l.JS, dir, repair.Options{BatchSize: 50, Progress: func(done, total uint64) { progressed = done }})
	if err != nil {
		t.Fatal(err)
	}
	if seq != l.LastSeq(t) || progressed != seq {
		t.Fatalf("rebuilt to %d (progress %d), want %d", seq, progressed, l.LastSeq(t))
	}
	ents, _ := os.ReadDir(data)
	if len(ents) != 1 || ents[0].Name() != "projection" {
		t.Fatalf("data dir holds %v", ents)
	}
	s := opsrig.OpenStore(t, dir)
	if !bytes.Equal(opsrig.Dump(t, s), opsrig.Dump(t, l.Fold(t, 0))) {
		t.Fatal("rebuilt projection differs from a fresh fold")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// No projection yet.
	dir2 := filepath.Join(t.TempDir(), "projection")
	if _, err := repair.OfflineRebuild(ctx(t), l.JS, dir2, repair.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir2); err != nil {
		t.Fatal(err)
	}

	// RebuildInto never reuses a directory with something in it.
	if _, err := repair.RebuildInto(ctx(t), l.JS, dir2, 0, repair.Options{}); !errors.Is(err, repair.ErrDirInUse) {
		t.Fatalf("rebuild into a used directory: %v", err)
	}
}
