package projections_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/projections/fold"
)

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestFoldOrphanAmplification: one raw publish (direct NATS publishing is a
// supported append path, contract §8) of a withdrawal naming N proposals that
// do not exist makes the fold store N orphan copies of the whole envelope:
// O(N × size) bytes from one message of at most 1 MiB. A 1 MiB withdrawal
// can name ~150,000 short ids: ~200 GB written (and held in the batch
// overlay's memory first), and the projector then crash-loops on the same
// event. Nothing a client sends may stop the projector (contract §8).
func TestFoldOrphanAmplification(t *testing.T) {
	const n = 300
	targets := make([]string, n)
	for i := range targets {
		targets[i] = fmt.Sprintf("missing-%d", i)
	}
	env := map[string]any{"protocol": "mew/v0.4", "id": "amplifier", "from": "mallory", "kind": "mcp/withdraw",
		"correlation_id": targets, "payload": map[string]any{"reason": "other", "pad": strings.Repeat("x", 30000)}}
	raw, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, t.TempDir())
	b := s.NewBatch()
	if _, err := fold.NewFolder().Apply(b, fold.Event{Seq: 1, Time: time.Unix(1767225600, 0), Subject: "ledger.default.missing-0.withdraw.mallory", Raw: raw}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	var w countingWriter
	if err := s.Dump(&w); err != nil {
		t.Fatal(err)
	}
	// A history entry and an index entry per target are fair; a copy of
	// the envelope per target is not.
	if limit := 8*len(raw) + n*2048; w.n > limit {
		t.Fatalf("one %d-byte event naming %d missing proposals stored %d bytes (%.0f× its size), over %d",
			len(raw), n, w.n, float64(w.n)/float64(len(raw)), limit)
	}
}

// TestFoldEventsCountsHistoryFiledBeforeCreation: an event that does not
// apply (invalid, ignored, duplicate) is filed under the id its subject
// names; when that id becomes a proposal later, the entry is in the
// proposal's history but not counted in its events, so events ≠ the
// length of GET /history (the fold's own rule is "Events always equals
// the length of its history").
func TestFoldEventsCountsHistoryFiledBeforeCreation(t *testing.T) {
	s := openStore(t, t.TempDir())
	f := fold.NewFolder()
	b := s.NewBatch()
	at := time.Unix(1767225600, 0)
	if _, err := f.Apply(b, fold.Event{Seq: 1, Time: at, Subject: "ledger.default.k.withdraw.x", Raw: []byte("{")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(b, fold.Event{Seq: 2, Time: at, Subject: "ledger.default.k.proposal.a",
		Raw: []byte(`{"protocol":"mew/v0.4","id":"k","from":"a","kind":"mcp/proposal","payload":{"method":"m"}}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(2); err != nil {
		t.Fatal(err)
	}
	p, err := s.Get("default", "k")
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.History("default", "k")
	if err != nil {
		t.Fatal(err)
	}
	if p.Events != len(h) {
		t.Fatalf("events %d, history %d entries: %+v", p.Events, len(h), h)
	}
}

// TestFoldManyTargetsLinear: folding one raw withdrawal that names N
// missing proposals must cost O(N + size), not O(N × size). The orphan
// path reads and rewrites the event's parked record (the whole envelope,
// JSON with base64 bytes) once per target: a 1 MiB withdrawal naming
// ~150,000 short ids makes the projector decode and encode ~150,000 MiB —
// it stalls for many minutes on one message. Measured in bytes allocated
// (deterministic), not in time.
func TestFoldManyTargetsLinear(t *testing.T) {
	const n = 3000
	raw := badinput.Generators["corr-entries"](n)
	s := openStore(t, t.TempDir())
	b := s.NewBatch()
	defer b.Discard()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := fold.NewFolder().Apply(b, fold.Event{Seq: 1, Time: time.Unix(1767225600, 0),
		Subject: "ledger.default.p0.withdraw.hostile-agent", Raw: raw}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if limit := uint64(64*len(raw) + n*8192); alloc > limit {
		t.Fatalf("folding one %d-byte withdrawal naming %d missing proposals allocated %d bytes (%.0f× its size), over %d: quadratic",
			len(raw), n, alloc, float64(alloc)/float64(len(raw)), limit)
	}
}
