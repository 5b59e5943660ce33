package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/internal/server/app"
)

// TestNDJSONMemoryBounded: a 16 MiB body of "{}" lines (5.6 million
// refusals) is read, refused and answered line by line; the server's heap
// grows by a bounded amount, not with the body (it grew 3.8 GB when the
// whole body and its results were held). The client reads the answers
// while it is still sending (full duplex).
func TestNDJSONMemoryBounded(t *testing.T) {
	l := start(t, func(o *app.Options) { o.MaxBatchBytes = 64 << 20 })
	bodyBytes := 16 << 20
	if raceEnabled { // ten times slower: a quarter of the body shows the same
		bodyBytes = 4 << 20
	}
	body := bytes.Repeat([]byte("{}\n"), bodyBytes/3)
	lines := bytes.Count(body, []byte("\n"))

	// The heap sampled is HeapAlloc, garbage included: at the default
	// GOGC (100) the collector lets garbage reach the live heap's size
	// before it runs, and with the test process's live heap at ~126 MiB
	// that alone is as much as the bound. A collector at 20% keeps the
	// garbage to a fifth of the live heap, so what the bound measures is
	// what the request keeps (the body and its results, when it held
	// them, grew the heap by 3.8 GB).
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // sample the heap while the request runs
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	req, err := http.NewRequest(http.MethodPost, l.url+"/v1/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// One answer per line up to httpapi.CompactRefusalsAfter, then one for
	// the run of identical refusals to the last line.
	sc := bufio.NewScanner(resp.Body)
	n := 0
	var last api.AppendResult
	for sc.Scan() {
		n++
		var r api.AppendResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Line != n || r.Error == nil || r.Error.Code == "" {
			t.Fatalf("answer %d: %s (%v)", n, sc.Bytes(), err)
		}
		last = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if n != httpapi.CompactRefusalsAfter+1 || last.LastLine != lines {
		t.Fatalf("%d answers for %d lines, the last %+v", n, lines, last)
	}
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("%d lines of %d bytes: heap peak %d MiB over the %d MiB before", lines, len(body), growth>>20, base.HeapAlloc>>20)
	// The body (16 MiB) is already in the heap at the base; what the
	// request adds is its buffers, its window and garbage not yet
	// collected.
	if limit := int64(128 << 20); growth > limit {
		t.Fatalf("heap grew by %d MiB during the request, over %d MiB", growth>>20, limit>>20)
	}
}
