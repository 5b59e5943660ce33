package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestAsOfSharedFairly (issue 36 item 2): eight connections of one
// auditor ask for eight different points at once: each is answered, 200
// or 429 as_of_busy with Retry-After (one fold in hand per caller), and
// another caller asking for a point meanwhile is answered 200 (its fold
// waits behind at most the one fold of the auditor's in hand). Callers
// asking for the same point share one fold (ledger_as_of_folds_total
// grows by one, ledger_as_of_reuses_total by the others), the cache keeps
// a bounded number of folds, and the temporary directory holds no more
// than those.
func TestAsOfSharedFairly(t *testing.T) {
	a := apptest.Start(t, withAuthWriter(t))
	base := a.HTTPURL()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var b strings.Builder
	const n = 300
	for i := range n {
		fmt.Fprintf(&b, `{"protocol":"mew/v0.4","id":"asof-%d","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}`+"\n", i)
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
	for a.Store().AppliedSeq() < n {
		if ctx.Err() != nil {
			t.Fatal("not folded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	get := func(token string, seq int) (int, string, http.Header) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/proposals/asof-0?as_of_seq=%d", base, seq), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Errorf("as-of read: %v", err)
			return 0, "", nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	folds0, reuses0 := asOfCounters(t, a)

	// Eight points at once from one auditor, one point from another caller.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, h := get(auditorToken, 100+10*i)
			mu.Lock()
			defer mu.Unlock()
			statuses[code]++
			switch code {
			case http.StatusOK:
			case http.StatusTooManyRequests:
				if !strings.Contains(body, "as_of_busy") || h.Get("Retry-After") == "" {
					t.Errorf("an auditor's read over its share: %d %s (Retry-After %q), want as_of_busy with Retry-After", code, body, h.Get("Retry-After"))
				}
			default:
				t.Errorf("an auditor's read: %d %s", code, body)
			}
		}()
	}
	if code, body, _ := get(opsToken, 50); code != http.StatusOK {
		t.Fatalf("another caller's as-of read while the auditor asks eight points: %d %s", code, body)
	}
	wg.Wait()
	if statuses[http.StatusOK] < 1 {
		t.Fatalf("the auditor's reads: %v, want at least one answered", statuses)
	}
	t.Logf("the auditor's eight points: %v", statuses)

	// The same point, asked by two callers over and over: folded once.
	folds1, reuses1 := asOfCounters(t, a)
	for range 4 {
		for _, tok := range []string{auditorToken, opsToken} {
			if code, body, _ := get(tok, 222); code != http.StatusOK {
				t.Fatalf("as-of 222: %d %s", code, body)
			}
		}
	}
	folds2, reuses2 := asOfCounters(t, a)
	if folds2-folds1 != 1 || reuses2-reuses1 != 7 {
		t.Fatalf("eight reads of one point: %v folds, %v reuses; want 1 fold and 7 reuses", folds2-folds1, reuses2-reuses1)
	}
	if folds1-folds0 < 2 {
		t.Fatalf("folds before: %v", folds1-folds0)
	}
	_ = reuses0
	// Bounded: no more folds kept than the cache holds.
	ents, err := os.ReadDir(filepath.Join(a.Options().DataDir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "ledger-at-") {
			kept++
		}
	}
	if kept > 4 {
		t.Fatalf("%d temporary projections kept, want at most 4", kept)
	}
}

func asOfCounters(t *testing.T, a *app.App) (folds, reuses float64) {
	t.Helper()
	fams, err := a.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "ledger_as_of_folds_total":
			folds = f.GetMetric()[0].GetCounter().GetValue()
		case "ledger_as_of_reuses_total":
			reuses = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return folds, reuses
}
