package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestDiskFullSmallVolume (issue 36 item 1): the JetStream store and the
// Pebble projection share a small tmpfs (64 MiB, 256 MiB) with the
// product's defaults (no threshold lowered for the test). A ballast leaves
// a few MiB free, the ledger's own appends fill the rest until appends are
// refused storage_full; meanwhile every write route answers a specific
// refusal (gaps included) and reads answer. Once the ballast is removed
// the ledger accepts appends again by itself, in-process, and the
// projection catches up with everything acknowledged.
func TestDiskFullSmallVolume(t *testing.T) {
	for _, size := range []int{64 << 20, 256 << 20} {
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) { diskFullSmall(t, size) })
	}
}

func diskFullSmall(t *testing.T, size int) {
	mnt := mountTmpfs(t, size)
	a := apptest.Start(t, func(o *app.Options) {
		o.DataDir = filepath.Join(mnt, "data")
		o.MinSeqWait = 30 * time.Second
	})
	base := a.HTTPURL()
	hc := &http.Client{Timeout: 30 * time.Second}
	var (
		mu    sync.Mutex
		acked = map[string]uint64{}
		last  uint64
		n     int
	)
	// batch appends k envelopes as NDJSON and returns how many were
	// refused storage_full.
	batch := func(k int) (full int) {
		t.Helper()
		var b strings.Builder
		ids := make([]string, k)
		mu.Lock()
		for i := range ids {
			n++
			ids[i] = fmt.Sprintf("small-%d", n)
			fmt.Fprintf(&b, `{"protocol":"mew/v0.4","id":%q,"from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"pad":%q}}}`+"\n", ids[i], strings.Repeat("x", 8000))
		}
		mu.Unlock()
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(b.String()))
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("batch append not answered within 30 s: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			var e struct{ Error api.Error }
			body, _ := io.ReadAll(resp.Body)
			_ = json.Unmarshal(body, &e)
			if e.Error.Code != api.CodeStorageFull {
				t.Fatalf("batch refused: %d %s", resp.StatusCode, body)
			}
			return k
		}
		dec := json.NewDecoder(resp.Body)
		for i := 0; ; i++ {
			var r api.AppendResult
			if err := dec.Decode(&r); err != nil {
				if err != io.EOF {
					t.Fatalf("batch answer: %v", err)
				}
				break
			}
			switch {
			case r.Error == nil && r.Seq > 0:
				mu.Lock()
				acked[r.ID] = r.Seq
				last = max(last, r.Seq)
				mu.Unlock()
			case r.Error != nil && r.Error.Code == api.CodeStorageFull:
				full++
			case r.Error != nil && r.Error.Code == api.CodeUnavailable:
				// Not acknowledged while the disk filled: retrying is safe.
			default:
				t.Fatalf("batch line %d: %+v", i, r)
			}
		}
		return full
	}
	for range 5 {
		if f := batch(20); f != 0 {
			t.Fatalf("refused before the disk filled")
		}
	}
	// A ballast leaves a sixth of the volume to the ledger.
	ballast := filepath.Join(mnt, "ballast")
	free := freeOf(t, mnt)
	if err := os.WriteFile(ballast, make([]byte, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBallast(t, ballast, int64(free)-int64(size/6))

	full := false
	for i := 0; i < 400 && !full; i++ {
		full = batch(100) > 0
	}
	if !full {
		t.Fatalf("the ledger filled no disk: %d acknowledged, none refused storage_full", len(acked))
	}

	// While full: every write route answers a specific refusal at once,
	// reads answer.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, w := range []struct{ path, ctype, body string }{
		{"/v1/gaps", "application/json", `{"bridge":"b1","disconnected_at":"2026-01-02T03:04:05Z","reason":"test"}`},
		{"/v1/events", "application/json", `{"protocol":"mew/v0.4","id":"full-1","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{}}`},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+w.path, strings.NewReader(w.body))
		req.Header.Set("Content-Type", w.ctype)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("POST %s on a full disk: %v", w.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), api.CodeStorageFull) {
			t.Fatalf("POST %s on a full disk: %d %s, want 503 storage_full", w.path, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/healthz", "/v1/proposals?limit=5", "/v1/proposals/small-1", "/v1/status"} {
		resp, err := hc.Get(base + p)
		if err != nil {
			t.Fatalf("GET %s on a full disk: %v", p, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s on a full disk: %d %s", p, resp.StatusCode, body)
		}
	}

	// Space is back: appends are accepted again, by itself.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for batch(1) != 0 || a.StorageProblem() != "" {
		if time.Now().After(deadline) {
			t.Fatalf("not appending 60 s after space was freed (%d bytes free): %s", freeOf(t, mnt), a.StorageProblem())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The projection catches up with everything acknowledged.
	for a.Store().AppliedSeq() < last {
		if time.Now().After(deadline) {
			t.Fatalf("the projection is at %d, %d acknowledged", a.Store().AppliedSeq(), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for id := range acked {
		r, err := hc.Get(fmt.Sprintf("%s/v1/proposals/%s", base, id))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("acknowledged %s: %d", id, r.StatusCode)
		}
	}
	t.Logf("%d MiB: %d acknowledged up to seq %d, all in the projection; %d bytes free at the end", size>>20, len(acked), last, freeOf(t, mnt))
}

func freeOf(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

func writeBallast(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := f.Write(chunk[:k]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return // the ledger took some meanwhile: full is full
			}
			t.Fatalf("ballast: %v", err)
		}
		n -= k
	}
}

// TestDiskFullProjection (issue 36 item 1): the projection meets the full
// disk first, with the embedded server (projectionMeetsFullDisk).
func TestDiskFullProjection(t *testing.T) {
	mnt := mountTmpfs(t, 64<<20)
	a := apptest.Start(t, func(o *app.Options) {
		o.DataDir = filepath.Join(mnt, "data")
	})
	projectionMeetsFullDisk(t, a, mnt, "proj")
}

// projectionMeetsFullDisk is the scenario of the projection meeting the
// full disk first, on a's data volume mnt: with the projector paused,
// 1,200 envelopes (ids prefix-N) are stored; the volume is filled to the
// last byte; the projector resumes and cannot write. The ledger does not
// stop: the problem names the projection, reads answer, an append is
// refused storage_full; once the ballast is removed the projection is
// reopened in-process and folds everything acknowledged.
func projectionMeetsFullDisk(t *testing.T, a *app.App, mnt, prefix string) {
	t.Helper()
	base := a.HTTPURL()
	hc := &http.Client{Timeout: 30 * time.Second}
	a.Projector().Pause()
	var b strings.Builder
	const n = 1200
	for i := range n {
		fmt.Fprintf(&b, `{"protocol":"mew/v0.4","id":"%s-%d","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"pad":%q}}}`+"\n", prefix, i, strings.Repeat("y", 8000))
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(b.String()))
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	dec := json.NewDecoder(resp.Body)
	for {
		var r api.AppendResult
		if err := dec.Decode(&r); err != nil {
			break
		}
		if r.Error != nil {
			t.Fatalf("append before the disk filled: %+v", r.Error)
		}
		last = max(last, r.Seq)
	}
	resp.Body.Close()
	if last == 0 {
		t.Fatal("nothing appended")
	}
	ballast := fill(t, mnt)
	a.Projector().Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !strings.Contains(a.StorageProblem(), "projection") {
		if ctx.Err() != nil {
			_ = os.Remove(ballast)
			t.Fatalf("the projection never said it met the full disk (applied %d of %d; problem %q)", a.Store().AppliedSeq(), last, a.StorageProblem())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Reads answer; an append is refused storage_full.
	r, err := hc.Get(base + "/v1/proposals?limit=5")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("a read while the projection cannot write: %d", r.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(fmt.Sprintf(`{"protocol":"mew/v0.4","id":"%s-full","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}`, prefix)))
	req.Header.Set("Content-Type", "application/json")
	if r, err = hc.Do(req); err != nil {
		t.Fatal(err)
	}
	var eb struct {
		Error api.Error `json:"error"`
	}
	_ = json.NewDecoder(r.Body).Decode(&eb)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable && r.StatusCode != http.StatusInsufficientStorage || !strings.Contains(eb.Error.Code, "storage_full") {
		t.Fatalf("an append while the projection cannot write: %d %+v, want storage_full", r.StatusCode, eb.Error)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for a.StorageProblem() != "" || a.Store().AppliedSeq() < last {
		if ctx.Err() != nil {
			t.Fatalf("60 s after space was freed: applied %d of %d, problem %q", a.Store().AppliedSeq(), last, a.StorageProblem())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, err = hc.Get(fmt.Sprintf("%s/v1/proposals/%s-%d", base, prefix, n-1))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the last acknowledged proposal after the projection came back: %d", r.StatusCode)
	}
}
