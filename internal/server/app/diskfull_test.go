package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory and
// unmounts it at the end of the test (after everything registered later
// has closed). The disk-full test needs it: it runs as root, as CI does;
// a refused mount fails the test.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs on %s: %v (the disk-full test runs as root, as CI does)", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a ballast file in dir until the disk is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	// The last bytes a smaller write can still take.
	for n := len(chunk) / 2; n > 0; n /= 2 {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// TestDiskFull (issue 29 item 5): on a small tmpfs, the disk fills while
// envelopes are appended. Every append is answered within 30 s (an
// outcome, not a speed: a hang never is): stored, or refused 503 (storage_full once the
// ledger has noticed); /readyz is 503 naming the store; once the ballast
// is removed the ledger becomes ready and appends again by itself, and
// every envelope it acknowledged is in the projection.
func TestDiskFull(t *testing.T) {
	mnt := mountTmpfs(t, 64<<20)
	a := apptest.Start(t, func(o *app.Options) {
		o.DataDir = filepath.Join(mnt, "data")
		o.DiskResumeFree = 4 << 20
	})
	base := a.HTTPURL()
	hc := &http.Client{Timeout: 30 * time.Second}
	acked := map[string]uint64{}
	n := 0
	appendOne := func() (int, api.AppendResult) {
		t.Helper()
		n++
		id := fmt.Sprintf("disk-%d", n)
		env := fmt.Sprintf(`{"protocol":"mew/v0.4","id":%q,"from":"agent","to":["t"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"pad":%q}}}`, id, strings.Repeat("x", 2000))
		resp, err := hc.Post(base+"/v1/events", "application/json", strings.NewReader(env))
		if err != nil {
			t.Fatalf("append %s not answered within 30 s: %v", id, err)
		}
		defer resp.Body.Close()
		var r api.AppendResult
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &r)
		if resp.StatusCode == http.StatusAccepted {
			acked[id] = r.Seq
		} else if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("append %s: %d %s", id, resp.StatusCode, b)
		}
		return resp.StatusCode, r
	}
	for range 20 {
		if st, _ := appendOne(); st != http.StatusAccepted {
			t.Fatalf("append before the disk filled: %d", st)
		}
	}
	ballast := fill(t, mnt)

	// Appends until the ledger says the disk is full (bounded).
	full := false
	for i := 0; i < 200 && !full; i++ {
		_, r := appendOne()
		full = r.Error != nil && r.Error.Code == api.CodeStorageFull
	}
	if !full {
		t.Fatalf("200 appends on a full disk, none refused storage_full (acked %d)", len(acked))
	}
	resp, err := hc.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(body, []byte(api.CodeStorageFull)) || !bytes.Contains(body, []byte(mnt)) {
		t.Fatalf("/readyz on a full disk: %d %s, want 503 storage_full naming %s", resp.StatusCode, body, mnt)
	}

	// Space is back: ready and appending again, by itself.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, _ := appendOne(); st == http.StatusAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not appending 60 s after space was freed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err = hc.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after space came back: %d %s", resp.StatusCode, body)
	}

	// Nothing acknowledged was lost.
	var last uint64
	for _, seq := range acked {
		last = max(last, seq)
	}
	for id := range acked {
		r, err := hc.Get(fmt.Sprintf("%s/v1/proposals/%s?min_seq=%d", base, id, last))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("acknowledged %s: %d", id, r.StatusCode)
		}
	}
	t.Logf("%d appends, %d acknowledged, all in the projection", n, len(acked))
}
