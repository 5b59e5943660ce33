package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/auth/httpauth"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestAsOfMemoryBound (issue 36): with thousands of events, eight
// auditors (eight tokens, eight connections) ask eight different points
// at once while a ninth asks another: every read is answered, 200 or 503
// as_of_busy with Retry-After, never left hanging, and the temporary
// stores open at once never pass the documented bound (asOfKeep + 1 = 5
// Pebble stores of ≈ 24 MiB each: ≈ 120 MiB; on disk, about the live
// projection's size each). The process's peak resident memory growth is
// measured and logged beside it (not asserted: the race detector and the
// rest of the process move it).
func TestAsOfMemoryBound(t *testing.T) {
	const (
		readers   = 9
		events    = 4000
		maxStores = 5
	)
	tokens := []httpauth.Token{{Name: "writer", SHA256: httpauth.HashToken(writerToken), Roles: []httpauth.Role{httpauth.RoleWriter}}}
	for i := range readers {
		tokens = append(tokens, httpauth.Token{Name: fmt.Sprintf("aud-%d", i), SHA256: httpauth.HashToken(fmt.Sprintf("aud-secret-%d", i)), Roles: []httpauth.Role{httpauth.RoleAuditor}})
	}
	g, err := httpauth.New(httpauth.Config{Tokens: tokens, WriteLimit: httpauth.RateConfig{PerSecond: -1}, DefaultSpace: app.DefaultSpace})
	if err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, func(o *app.Options) {
		o.HTTPAuthenticating = true
		o.HTTPMiddleware = func(next http.Handler) (http.Handler, error) { return g.Protect(g.Rules(), next) }
	})
	base := a.HTTPURL()
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	for batch := 0; batch < events; batch += 1000 {
		var b strings.Builder
		for i := batch; i < batch+1000; i++ {
			fmt.Fprintf(&b, `{"protocol":"mew/v0.4","id":"bound-%d","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","n":%d}}`+"\n", i, i)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/events", strings.NewReader(b.String()))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+writerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("append: %d", resp.StatusCode)
		}
	}
	for a.Store().AppliedSeq() < events {
		if ctx.Err() != nil {
			t.Fatal("not folded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	live := dirSize(t, a.Options().ProjectionDir())
	tmp := a.Options().TmpDir()
	rss0 := resetPeakRSS(t)

	// Sample the stores and the temporary directory while the reads run.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		peakDisk int64
	)
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if d := dirSize(t, tmp); d > peakDisk {
				peakDisk = d
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/proposals/bound-0?as_of_seq=%d", base, 400*(i+1)), nil)
			req.Header.Set("Authorization", "Bearer "+fmt.Sprintf("aud-secret-%d", i))
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err != nil {
				t.Errorf("reader %d: not answered: %v", i, err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
			switch resp.StatusCode {
			case http.StatusOK:
			case http.StatusServiceUnavailable:
				if !strings.Contains(string(body), "as_of_busy") || resp.Header.Get("Retry-After") == "" {
					t.Errorf("reader %d: %d %s (Retry-After %q), want 503 as_of_busy with Retry-After", i, resp.StatusCode, body, resp.Header.Get("Retry-After"))
				}
			default:
				t.Errorf("reader %d: %d %s, want 200 or 503 as_of_busy", i, resp.StatusCode, body)
			}
		}()
	}
	wg.Wait()
	close(done)
	<-sampled
	_, peak := a.AsOfStores()
	grew := peakRSS(t) - rss0
	t.Logf("readers: %v; temporary stores open at once: %d (bound %d); temporary disk peak %d KiB (live projection %d KiB); peak RSS growth %d MiB (bound of the stores ≈ %d MiB)",
		statuses, peak, maxStores, peakDisk>>10, live>>10, grew>>20, maxStores*24)
	if statuses[http.StatusOK] < 1 {
		t.Fatalf("readers: %v, want at least one answered 200", statuses)
	}
	if peak < 1 || peak > maxStores {
		t.Fatalf("%d temporary stores open at once, want 1..%d", peak, maxStores)
	}
	// On disk: each store about the live projection's size (a fold of
	// part of the log is no larger); a generous allowance for Pebble's
	// own files (WAL, manifest, options) of each store.
	if limit := int64(maxStores) * (live + 8<<20); peakDisk > limit {
		t.Fatalf("temporary disk peak %d bytes, over %d stores × (the live projection's %d + 8 MiB)", peakDisk, maxStores, live)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// resetPeakRSS resets the process's peak resident size (VmHWM) and
// returns the resident size now, in bytes (0 where /proc has none).
func resetPeakRSS(t *testing.T) int64 {
	t.Helper()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return procStatus(t, "VmRSS:")
}

func peakRSS(t *testing.T) int64 { return procStatus(t, "VmHWM:") }

func procStatus(t *testing.T, key string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
