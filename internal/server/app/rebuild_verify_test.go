package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/ops/repair"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/projections"
)

// appendAll appends raws through the app's appender and fails on any
// error; it returns the last sequence.
func appendAll(t *testing.T, a *app.App, raws [][]byte) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last uint64
	for i, r := range a.Appender().AppendMany(ctx, "", raws) {
		if r.Err != nil {
			t.Fatalf("append %d: %v", i, r.Err)
		}
		last = max(last, r.Seq)
	}
	return last
}

// compareWithRebuild waits until the live projection has folded the whole
// log, then compares it with a fresh fold of the log (projections.Compare).
func compareWithRebuild(t *testing.T, a *app.App) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := newClient(t, a).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Store().WaitApplied(ctx, st.StreamSeq); err != nil {
		t.Fatal(err)
	}
	v, err := repair.At(ctx, a.JetStream(), repair.Point{Seq: st.StreamSeq}, repair.Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	d, err := projections.Compare(a.Store(), v.Store)
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		t.Fatalf("live projection differs from a rebuild at seq %d: %s", st.StreamSeq, d.Format("live", "rebuild"))
	}
	return st.StreamSeq
}

// TestOnlineRebuild rebuilds through POST /v1/ops/rebuild while appends go
// on and reads are answered; afterwards the projection equals a fresh
// fold of the log and the projector keeps folding new appends.
func TestOnlineRebuild(t *testing.T) {
	a := apptest.Start(t, func(o *app.Options) {
		o.RebuildSwapLag = 20
		o.SyncInterval = time.Minute // not a durability test: quicker appends
	})
	c := newClient(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	gen := workload.New(workload.Options{Seed: 7, Prefix: "pre-", Disorder: 5})
	first := appendAll(t, a, gen.Batch(1500))
	if err := a.Store().WaitApplied(ctx, first); err != nil {
		t.Fatal(err)
	}
	someID := gen.Proposals()[0]

	var (
		stop                        = make(chan struct{})
		wg                          sync.WaitGroup
		appendedDuring, readsDuring atomic.Int64
		readErrs                    = make(chan error, 100)
		lastAppended                atomic.Uint64
		// Each goroutine ticks after every round: the test waits for
		// rounds, not for time to pass.
		appendTick, readTick = make(chan struct{}, 1), make(chan struct{}, 1)
	)
	tick := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	// rounds waits until each goroutine has completed n more rounds.
	rounds := func(n int) {
		for _, c := range []chan struct{}{appendTick, readTick} {
			select { // a tick left from before does not count
			case <-c:
			default:
			}
			for range n {
				select {
				case <-c:
				case <-ctx.Done():
					t.Fatal("appends or reads stopped")
				}
			}
		}
	}
	running := func() bool { return a.RebuildStatus().Running }
	wg.Add(2)
	go func() { // appends go on
		defer wg.Done()
		g := workload.New(workload.Options{Seed: 8, Prefix: "during-"})
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := c.PublishLines(ctx, "", g.Batch(10))
			if err != nil {
				readErrs <- fmt.Errorf("append during the rebuild: %w", err)
				return
			}
			for _, r := range res {
				if r.Error != nil {
					readErrs <- fmt.Errorf("append during the rebuild refused: %v", r.Error)
					return
				}
				lastAppended.Store(max(lastAppended.Load(), r.Seq))
			}
			if running() {
				appendedDuring.Add(int64(len(res)))
			}
			tick(appendTick)
		}
	}()
	go func() { // reads answer throughout
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := c.Get(ctx, someID, apitest.ReadOptions{}); err != nil {
				readErrs <- fmt.Errorf("get during the rebuild: %w", err)
				return
			}
			if _, _, err := c.Stats(ctx, apitest.ReadOptions{MinSeq: first}); err != nil {
				readErrs <- fmt.Errorf("stats during the rebuild: %w", err)
				return
			}
			if _, _, err := c.List(ctx, apitest.ListFilter{Limit: 5}, apitest.ReadOptions{}); err != nil {
				readErrs <- fmt.Errorf("list during the rebuild: %w", err)
				return
			}
			if running() {
				readsDuring.Add(1)
			}
			tick(readTick)
		}
	}()

	rounds(1) // appends and reads are going
	st, err := c.StartRebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Phase != api.RebuildFold || st.StartedAt == nil {
		t.Fatalf("start: %+v", st)
	}
	var busy *api.Error
	if _, err := c.StartRebuild(ctx); !errors.As(err, &busy) || busy.Status != http.StatusConflict || busy.Code != api.CodeBusy {
		if s, _ := c.RebuildStatus(ctx); s != nil && s.Running {
			t.Errorf("a second rebuild while one runs: %v, want 409 busy", err)
		}
	}
	for {
		st, err = c.RebuildStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rounds(2) // a whole round of appends and reads on the new projection
	close(stop)
	wg.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Error(err)
	}
	if st.Phase != api.RebuildDone || st.Error != "" || st.FinishedAt == nil || st.Events < first || st.EventsPerSecond <= 0 || st.Seq < first {
		t.Fatalf("rebuild status %+v", st)
	}
	if appendedDuring.Load() == 0 || readsDuring.Load() == 0 {
		t.Errorf("during the rebuild: %d appends, %d reads; want some of each", appendedDuring.Load(), readsDuring.Load())
	}
	t.Logf("rebuild: %d events at %.0f/s; %d appends and %d read rounds during it", st.Events, st.EventsPerSecond, appendedDuring.Load(), readsDuring.Load())
	if _, err := os.Stat(a.Options().ProjectionDir() + repair.NewDirSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rebuild's copy is left: %v", err)
	}

	last := compareWithRebuild(t, a)
	if last < lastAppended.Load() {
		t.Fatalf("status says seq %d, an append was acknowledged at %d", last, lastAppended.Load())
	}

	// The new projector folds new appends.
	r, err := c.Publish(ctx, "", []byte(proposal))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get(ctx, "env-req-1", apitest.ReadOptions{MinSeq: r.Seq}); err != nil {
		t.Fatalf("after the rebuild, a new append is not folded: %v", err)
	}

	// Online verify agrees.
	res, err := c.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Seq < r.Seq || res.Digest == "" || res.Difference != nil {
		t.Fatalf("verify after the rebuild: %+v", res)
	}
	if a.Projector().Paused() {
		t.Fatal("the projector is still paused after verify")
	}
}

// TestOnlineRebuildStoppedByShutdown: closing the ledger during a rebuild
// cancels it; the ledger restarts on its data with the old projection,
// and the half-built copy is gone.
func TestOnlineRebuildStoppedByShutdown(t *testing.T) {
	o := apptest.Options(t)
	o.SyncInterval = time.Minute
	a := apptest.StartWith(t, o)
	last := appendAll(t, a, workload.New(workload.Options{Seed: 3}).Batch(1000))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := a.Store().WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartRebuild(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	st := a.RebuildStatus()
	if st.Running || (st.Phase != api.RebuildFailed && st.Phase != api.RebuildDone) {
		t.Fatalf("after Close: %+v", st)
	}
	b := apptest.StartWith(t, o)
	if got := b.Store().AppliedSeq(); got != last {
		t.Fatalf("after restart the projection is at %d, want %d", got, last)
	}
	if _, err := os.Stat(o.ProjectionDir() + repair.NewDirSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rebuild's copy is left: %v", err)
	}
	compareWithRebuild(t, b)
}

// answers are what the live API answered at one checkpoint.
type answers struct {
	seq                      uint64
	at                       time.Time
	get, history, list, stat string
}

func httpGet(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestAsOfQueries records what the live API answered after each batch the
// projector committed, then asks the same reads with as_of_seq (and
// as_of, the batch's last stream time) and compares the bytes.
func TestAsOfQueries(t *testing.T) {
	var (
		mu       sync.Mutex
		recorded []answers
		base     atomic.Pointer[string]
	)
	const id = "env-req-1"
	paths := func(q string) [4]string {
		return [4]string{"/v1/proposals/" + id + q, "/v1/proposals/" + id + "/history" + q, "/v1/proposals?limit=3" + q2(q), "/v1/stats" + q}
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.OnBatch = func(b projections.BatchInfo) {
			u := base.Load()
			if u == nil {
				return
			}
			var out [4]string
			for i, p := range paths("") {
				resp, err := http.Get(*u + p)
				if err != nil {
					return // shutting down
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				out[i] = string(b)
			}
			mu.Lock()
			recorded = append(recorded, answers{seq: b.LastSeq, at: b.LastStored, get: out[0], history: out[1], list: out[2], stat: out[3]})
			mu.Unlock()
		}
	})
	u := a.HTTPURL()
	base.Store(&u)
	defer base.Store(nil)
	c := newClient(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	steps := []string{
		proposal,
		`{"protocol":"mew/v0.4","id":"rej-1","from":"fs-agent","kind":"mcp/reject","correlation_id":["env-req-1"],"payload":{"reason":"unsafe"}}`,
		`{"protocol":"mew/v0.4","id":"p-2","from":"b","kind":"mcp/proposal","payload":{"method":"m","params":{}}}`,
		fulfil,
		`{"protocol":"mew/v0.4","id":"chat-1","from":"fs-agent","kind":"chat","correlation_id":["rej-1"],"payload":{"text":"too risky"}}`,
	}
	var last uint64
	for _, s := range steps { // one at a time: one batch each, mostly
		r, err := c.Publish(ctx, "", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Seq
		if err := a.Store().WaitApplied(ctx, r.Seq); err != nil {
			t.Fatal(err)
		}
	}
	var recs []answers
	for deadline := testctx.Deadline(t); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock() // OnBatch records after the commit WaitApplied saw
		recs = append(recs[:0], recorded...)
		mu.Unlock()
		if len(recs) > 0 && recs[len(recs)-1].seq == last || time.Now().After(deadline) {
			break
		}
	}
	if len(recs) == 0 || recs[len(recs)-1].seq != last {
		t.Fatalf("recorded %d batches, want the last at %d", len(recs), last)
	}
	for _, rec := range recs {
		for _, q := range []string{fmt.Sprintf("?as_of_seq=%d", rec.seq), "?as_of=" + rec.at.UTC().Format(time.RFC3339Nano)} {
			for i, p := range paths(q) {
				status, h, body := httpGet(t, u+p)
				want := [4]string{rec.get, rec.history, rec.list, rec.stat}[i]
				if body != want {
					t.Errorf("GET %s (status %d):\n%s\nwant what the live API answered at seq %d:\n%s", p, status, body, rec.seq, want)
				}
				if got := h.Get("Ledger-As-Of-Seq"); got != fmt.Sprint(rec.seq) {
					t.Errorf("GET %s: Ledger-As-Of-Seq %q, want %d", p, got, rec.seq)
				}
			}
		}
	}

	// Errors.
	for _, tc := range []struct{ q, code, field string }{
		{fmt.Sprintf("?as_of_seq=%d", last+5), api.CodeBeyondLog, "as_of_seq"},
		{"?as_of=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), api.CodeBeyondLog, "as_of"},
		{"?as_of_seq=0", api.CodeBadQuery, "as_of_seq"},
		{"?as_of_seq=1&as_of=2026-01-01", api.CodeBadQuery, "as_of"},
		{"?as_of_seq=1&min_seq=1", api.CodeBadQuery, "min_seq"},
		{"?as_of=yesterday", api.CodeBadQuery, "as_of"},
	} {
		status, _, body := httpGet(t, u+"/v1/stats"+tc.q)
		if status != http.StatusBadRequest || !strings.Contains(body, `"code":"`+tc.code+`"`) || !strings.Contains(body, `"field":"`+tc.field+`"`) {
			t.Errorf("GET /v1/stats%s: %d %s, want 400 %s field %s", tc.q, status, body, tc.code, tc.field)
		}
	}
	// Before the first event: nothing.
	status, _, _ := httpGet(t, u+"/v1/proposals/"+id+"?as_of=2000-01-01")
	if status != http.StatusNotFound {
		t.Errorf("as of 2000: %d, want 404", status)
	}
	// Temporary projections: at most the cached ones are left (the four
	// most recently used points).
	ents, err := os.ReadDir(a.Options().TmpDir())
	if err != nil || len(ents) > 4 {
		t.Errorf("%s holds %d entries (%v), want at most the 4 cached projections", a.Options().TmpDir(), len(ents), err)
	}
}

func q2(q string) string {
	if q == "" {
		return ""
	}
	return "&" + q[1:]
}
