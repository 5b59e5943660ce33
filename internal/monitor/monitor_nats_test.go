package monitor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/monitor"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/blockfile"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/subjects"
)

const origin = "test.example/ledger"

// keyFile makes a checkpoint signing key and returns its file and
// verifier key.
func keyFile(t *testing.T) (string, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "checkpoint.key")
	skey, err := proofs.GenerateKeyFile(f, origin)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := evidence.VerifierKeyOf(skey)
	if err != nil {
		t.Fatal(err)
	}
	return f, vkey
}

func options(t *testing.T, key string) app.Options {
	o := apptest.Options(t)
	o.CheckpointInterval = 20 * time.Millisecond
	o.CheckpointKeyFile = key
	return o
}

// appendN appends n envelopes (ids prefix-0..) in batches and returns the
// last sequence.
func appendN(t *testing.T, a *app.App, prefix string, n int) uint64 {
	t.Helper()
	last, err := appendBatch(a, prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// appendBatch is appendN returning its error (for a goroutine).
func appendBatch(a *app.App, prefix string, n int) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last uint64
	for start := 0; start < n; start += 100 {
		var raws [][]byte
		for i := start; i < min(n, start+100); i++ {
			raws = append(raws, []byte(opsrig.Env(fmt.Sprintf("%s-%d", prefix, i), "alice", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`)))
		}
		for i, r := range a.Appender().AppendMany(ctx, a.Appender().Space(), raws) {
			if r.Err != nil {
				return last, fmt.Errorf("append %s-%d: %w", prefix, start+i, r.Err)
			}
			last = max(last, r.Seq)
		}
	}
	return last, nil
}

// waitSigned waits for a signed checkpoint of at least size leaves.
func waitSigned(t *testing.T, a *app.App, size uint64) evidence.Checkpoint {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if e, ok := a.Proofs().Log().Latest(); ok && e.Checkpoint.Size >= int64(size) {
			return e.Checkpoint
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s, no signed checkpoint of %d leaves", size)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func open(t *testing.T, url, vkey, dir string) *monitor.Monitor {
	t.Helper()
	m, err := monitor.Open(context.Background(), monitor.Options{URL: url, VerifierKey: vkey, StateDir: dir, Logger: natstest.Logger(t), Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func check(t *testing.T, m *monitor.Monitor) (monitor.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return m.Check(ctx)
}

// mustFind checks and wants a finding of kind with the sizes given.
func mustFind(t *testing.T, m *monitor.Monitor, kind error, accepted, size int64) *monitor.Finding {
	t.Helper()
	_, err := check(t, m)
	var f *monitor.Finding
	if !errors.As(err, &f) || !errors.Is(err, monitor.ErrFinding) || !errors.Is(err, kind) {
		t.Fatalf("check: %v, want a finding %v", err, kind)
	}
	if f.Accepted != accepted || f.Size != size {
		t.Fatalf("finding %v: sizes %d → %d, want %d → %d", f, f.Accepted, f.Size, accepted, size)
	}
	return f
}

// TestFollowsUnderLoad: a monitor checking while a ledger takes appends
// follows it to the end without a finding, keeps a copy whose tree is the
// signed one, and resumes after a stop with nothing to redo.
func TestFollowsUnderLoad(t *testing.T) {
	key, vkey := keyFile(t)
	a := apptest.StartWith(t, options(t, key))
	dir := t.TempDir()
	m := open(t, a.HTTPURL(), vkey, dir)

	var wg sync.WaitGroup
	var last uint64
	var appendErr error
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for b := range 12 {
			if last, appendErr = appendBatch(a, fmt.Sprintf("load%d", b), 100); appendErr != nil {
				return
			}
		}
	})
	defer wg.Wait()
	checks := 0
	for {
		if _, err := check(t, m); err != nil {
			t.Fatalf("check %d under load: %v", checks, err)
		}
		checks++
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	wg.Wait()
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	final := waitSigned(t, a, last)
	res, err := check(t, m)
	if err != nil || res.Size != final.Size || res.Root != final.Hash {
		t.Fatalf("last check: %+v %v, want size %d root %s", res, err, final.Size, final.Hash)
	}
	if st := m.Stats(); st.EntriesVerified != final.Size || st.Size != final.Size || len(st.LastFinding) != 0 {
		t.Fatalf("stats after %d checks: %+v", checks, st)
	}
	t.Logf("%d checks followed the ledger to %d entries", checks+1, final.Size)
	// The copy is the signed tree.
	f, err := os.Open(filepath.Join(dir, monitor.CopyFile))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := archive.VerifyCheckpoint(f, final)
	f.Close()
	if err != nil || int64(sum.Lines) != final.Size {
		t.Fatalf("the copy against the checkpoint: %+v %v", sum, err)
	}
	// Resumed: nothing to redo; then the next appends only.
	m.Close()
	m = open(t, a.HTTPURL(), vkey, dir)
	if res, err := check(t, m); err != nil || res.Entries != 0 || res.Size != final.Size {
		t.Fatalf("after a restart: %+v %v", res, err)
	}
	last = appendN(t, a, "after", 10)
	waitSigned(t, a, last)
	if res, err := check(t, m); err != nil || res.Previous != final.Size || res.Size != int64(last) || res.Entries != int64(last)-final.Size {
		t.Fatalf("after 10 more: %+v %v", res, err)
	}
}

// TestResumesACopyCutShort: lines past the accepted checkpoint (a stop
// between writing lines and accepting their checkpoint) are dropped on
// start, and a copy edited by hand is refused (ErrState).
func TestResumesACopyCutShort(t *testing.T) {
	key, vkey := keyFile(t)
	a := apptest.StartWith(t, options(t, key))
	dir := t.TempDir()
	m := open(t, a.HTTPURL(), vkey, dir)
	waitSigned(t, a, appendN(t, a, "a", 300))
	if _, err := check(t, m); err != nil {
		t.Fatal(err)
	}
	accepted := m.Stats().Size
	m.Close()
	copyFile := filepath.Join(dir, monitor.CopyFile)
	whole, err := os.ReadFile(copyFile)
	if err != nil {
		t.Fatal(err)
	}
	// An older accepted checkpoint: the lines past it are dropped, then
	// fetched again.
	var older []byte
	waitSigned(t, a, 1)
	es, _, err := a.Proofs().Log().List(100, 1)
	if err != nil || len(es) == 0 {
		t.Fatalf("list: %v", err)
	}
	older = es[0].Note
	if err := os.WriteFile(filepath.Join(dir, monitor.CheckpointFile), older, 0o600); err != nil {
		t.Fatal(err)
	}
	m = open(t, a.HTTPURL(), vkey, dir)
	if res, err := check(t, m); err != nil || res.Previous != es[0].Checkpoint.Size || res.Size != accepted || res.Entries != accepted-es[0].Checkpoint.Size {
		t.Fatalf("resumed from %d: %+v %v", es[0].Checkpoint.Size, res, err)
	}
	m.Close()
	if again, _ := os.ReadFile(copyFile); !bytes.Equal(again, whole) {
		t.Fatal("the copy fetched again differs")
	}
	// Edited by hand.
	if err := os.WriteFile(copyFile, bytes.Replace(whole, []byte("a-7"), []byte("a-8"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := monitor.Open(context.Background(), monitor.Options{URL: a.HTTPURL(), VerifierKey: vkey, StateDir: dir, Logger: natstest.Logger(t)}); !errors.Is(err, monitor.ErrState) {
		t.Fatalf("open on an edited copy: %v, want ErrState", err)
	}
}

// TestForkShrinkRewrite: other ledgers signing with the same key, served
// at the address the monitor follows: another, longer history (a fork),
// a shorter one (a shrink), another of the same size (rewritten). Each is
// a finding naming the sizes (and the first leaf that differs); the
// accepted history is kept, and the honest ledger is followed on.
func TestForkShrinkRewrite(t *testing.T) {
	key, vkey := keyFile(t)
	honest := apptest.StartWith(t, options(t, key))
	dir := t.TempDir()
	waitSigned(t, honest, appendN(t, honest, "a", 300))
	m := open(t, honest.HTTPURL(), vkey, dir)
	if res, err := check(t, m); err != nil || res.Size != 300 {
		t.Fatalf("first check: %+v %v", res, err)
	}
	m.Close()
	for _, c := range []struct {
		name string
		n    int
		kind error
	}{{"fork", 400, monitor.ErrFork}, {"shrink", 200, monitor.ErrShrink}, {"rewrite", 300, monitor.ErrRewritten}} {
		t.Run(c.name, func(t *testing.T) {
			other := apptest.StartWith(t, options(t, key))
			// The same envelopes first (their leaves differ all the same:
			// a leaf holds the ledger's time), then another history.
			appendN(t, other, "a", 10)
			waitSigned(t, other, appendN(t, other, "mallory", c.n-10))
			m := open(t, other.HTTPURL(), vkey, dir)
			f := mustFind(t, m, c.kind, 300, int64(c.n))
			if c.kind != monitor.ErrShrink && f.Seq != 1 {
				t.Fatalf("%v: seq %d, want 1 (the first leaf that differs)", f, f.Seq)
			}
			if st := m.Stats(); st.Size != 300 || st.Findings[monitor.KindName(c.kind)] != 1 {
				t.Fatalf("stats after the finding: %+v", st)
			}
			m.Close()
		})
	}
	m = open(t, honest.HTTPURL(), vkey, dir)
	last := appendN(t, honest, "b", 20)
	waitSigned(t, honest, last)
	if res, err := check(t, m); err != nil || res.Previous != 300 || res.Size != int64(last) {
		t.Fatalf("the honest ledger after the findings: %+v %v", res, err)
	}
}

// TestRewrittenStream: the ledger's stream rewritten in its block file
// (an envelope changed, the record's checksum made valid again). While
// the ledger serves, it refuses the damaged entries (a monitor starting
// then finds them missing, naming the seq); rebuilt from scratch on the
// altered stream with the same key, it signs another history of the same
// size, which the monitor that followed it refuses as rewritten, naming
// the seq.
func TestRewrittenStream(t *testing.T) {
	key, vkey := keyFile(t)
	o := options(t, key)
	o.ScrubPeriod = 100 * time.Millisecond
	o.ScrubRate = -1
	a := apptest.StartWith(t, o)
	waitSigned(t, a, appendN(t, a, "a", 300))
	dir := t.TempDir()
	m := open(t, a.HTTPURL(), vkey, dir)
	if res, err := check(t, m); err != nil || res.Size != 300 {
		t.Fatalf("first check: %+v %v", res, err)
	}
	m.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := blockfile.Rewrite(o.NATSDir(), subjects.StreamName, 5, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"a-4"`), []byte(`"z-4"`), 1)
	}); err != nil {
		t.Fatal(err)
	}

	a = apptest.StartWith(t, o)
	fresh := open(t, a.HTTPURL(), vkey, t.TempDir())
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := check(t, fresh)
		var f *monitor.Finding
		if errors.As(err, &f) {
			if !errors.Is(err, monitor.ErrMissing) || f.Seq != 5 || f.Size != 300 {
				t.Fatalf("a monitor starting on the damaged ledger: %v, want entries missing at seq 5", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the damaged ledger still serves its entries: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fresh.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Rebuilt from scratch on the altered stream, the same key.
	for _, d := range []string{o.ProjectionDir(), o.CheckpointsDir()} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	a = apptest.StartWith(t, o)
	cp := waitSigned(t, a, 300)
	if cp.Size != 300 {
		t.Fatalf("rebuilt: signed %d", cp.Size)
	}
	m = open(t, a.HTTPURL(), vkey, dir)
	f := mustFind(t, m, monitor.ErrRewritten, 300, 300)
	if f.Seq != 5 {
		t.Fatalf("%v: seq %d, want 5", f, f.Seq)
	}
}

// TestAlteredEntries: a front that changes one entry of the bundles it
// relays (the tiles untouched): the entry does not hash to the signed
// tree, a finding naming its seq; nothing is copied past the accepted
// checkpoint.
func TestAlteredEntries(t *testing.T) {
	key, vkey := keyFile(t)
	a := apptest.StartWith(t, options(t, key))
	waitSigned(t, a, appendN(t, a, "a", 300))
	target, err := url.Parse(a.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Header.Del("Accept-Encoding") // bodies the front can edit
	}}
	proxy.ModifyResponse = func(r *http.Response) error {
		if !strings.HasPrefix(r.Request.URL.Path, "/v1/tile/entries/001") {
			return nil
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		b = bytes.Replace(b, []byte(`"a-260"`), []byte(`"a-666"`), 1)
		r.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	m := open(t, front.URL, vkey, t.TempDir())
	f := mustFind(t, m, monitor.ErrAltered, 0, 300)
	if f.Seq != 261 {
		t.Fatalf("%v: seq %d, want 261", f, f.Seq)
	}
	if st := m.Stats(); st.Size != -1 {
		t.Fatalf("a checkpoint was accepted over altered entries: %+v", st)
	}
}

// TestRunExportsMetrics: a long-running monitor (Run) follows appends and
// exports its metrics; it ends with its ctx.
func TestRunExportsMetrics(t *testing.T) {
	key, vkey := keyFile(t)
	a := apptest.StartWith(t, options(t, key))
	reg := prometheus.NewRegistry()
	m, err := monitor.Open(context.Background(), monitor.Options{URL: a.HTTPURL(), VerifierKey: vkey, StateDir: t.TempDir(),
		Logger: natstest.Logger(t), Interval: 20 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	last := appendN(t, a, "a", 500)
	waitSigned(t, a, last)
	gauge := func(name string) float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == name {
				m := f.GetMetric()[0]
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	waitFor(t, "the monitor at the last append", func() bool { return gauge("ledger_monitor_checked_size") == float64(last) })
	if v := gauge("ledger_monitor_entries_verified_total"); v != float64(last) {
		t.Fatalf("entries verified %v, want %d", v, last)
	}
	if v := gauge("ledger_monitor_last_finding_timestamp_seconds"); v != 0 {
		t.Fatalf("last finding at %v", v)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close twice: %v", err)
	}
}
