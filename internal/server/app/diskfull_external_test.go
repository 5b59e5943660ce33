package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// TestDiskFullProjectionExternalNATS (issue 36): with an external NATS
// server (--nats-url), the projection's volume (a real 64 MiB tmpfs; the
// log is on the server's own disk) fills while envelopes wait to be
// folded. The ledger does not stop: the projection's failure is a storage
// problem (appends refused storage_full, reads answered); once the
// ballast is removed the projection is reopened in-process and folds
// everything acknowledged.
func TestDiskFullProjectionExternalNATS(t *testing.T) {
	srv := natstest.Start(t)
	mnt := mountTmpfs(t, 64<<20)
	a := apptest.Start(t, func(o *app.Options) {
		o.NATSURLs = []string{srv.ClientURL()}
		o.DataDir = filepath.Join(mnt, "data")
	})
	base := a.HTTPURL()
	hc := &http.Client{Timeout: 30 * time.Second}
	a.Projector().Pause()
	var b strings.Builder
	const n = 1200
	for i := range n {
		fmt.Fprintf(&b, `{"protocol":"mew/v0.4","id":"ext-%d","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"pad":%q}}}`+"\n", i, strings.Repeat("y", 8000))
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
	req, _ = http.NewRequest(http.MethodPost, base+"/v1/events", strings.NewReader(`{"protocol":"mew/v0.4","id":"ext-full","from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call"}}`))
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
	r, err = hc.Get(fmt.Sprintf("%s/v1/proposals/ext-%d", base, n-1))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("the last acknowledged proposal after the projection came back: %d", r.StatusCode)
	}
}
