package proofs_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
)

// TestEntryBundles: the leaves are served as C2SP tlog-tiles entry
// bundles; each entry is the leaf whose hash the level-0 tile holds, a
// full bundle and the partial one of the checkpoint's size; a leaf over
// 65,535 bytes makes the C2SP framing refuse the bundle (409
// entry_too_long) and the long framing serve it.
func TestEntryBundles(t *testing.T) {
	a := apptest.Start(t, fast)
	base := a.HTTPURL()
	const n = 260
	var last uint64
	for i := range n {
		last = post(t, base, opsrig.Env(fmt.Sprintf("p%d", i), "alice", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`))
	}
	proposalProof(t, base, "p259", last) // a checkpoint covers them all
	v := a.Proofs().Verifier()
	_, _, note1 := get(t, base+"/v1/checkpoint")
	cp, _, err := evidence.OpenCheckpoint(note1, v)
	if err != nil || cp.Size < n {
		t.Fatalf("checkpoint %v: %v", cp, err)
	}
	tr := tlog.TileHashReader(cp.Tree(), httpTiles{t: t, base: base})
	check := func(bundleN int64, w int) {
		t.Helper()
		path := evidence.EntriesPath(bundleN, w)
		st, h, body := get(t, base+"/v1/"+path)
		if st != 200 || h.Get("Content-Type") != "application/octet-stream" || !strings.Contains(h.Get("Cache-Control"), "immutable") {
			t.Fatalf("GET %s: %d %q %q %s", path, st, h.Get("Content-Type"), h.Get("Cache-Control"), body)
		}
		leaves, err := evidence.SplitEntryBundle(body, evidence.FramingC2SP)
		if err != nil || len(leaves) != w {
			t.Fatalf("%s: %d leaves (%v), want %d", path, len(leaves), err, w)
		}
		idx := make([]int64, w)
		for i := range w {
			idx[i] = tlog.StoredHashIndex(0, bundleN*256+int64(i))
		}
		hs, err := tr.ReadHashes(idx)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range leaves {
			l, err := evidence.ParseLeaf(b)
			if err != nil || l.Seq != uint64(bundleN*256+int64(i)+1) {
				t.Fatalf("%s entry %d: %+v %v", path, i, l, err)
			}
			if evidence.LeafHash(b) != hs[i] {
				t.Fatalf("%s entry %d: hash %s, the tile holds %s", path, i, evidence.LeafHash(b), hs[i])
			}
		}
		// The long framing carries the same leaves.
		st, _, long := get(t, base+"/v1/"+path+"?framing=long")
		ll, err := evidence.SplitEntryBundle(long, evidence.FramingLong)
		if st != 200 || err != nil || len(ll) != w || !bytes.Equal(ll[w-1], leaves[w-1]) {
			t.Fatalf("%s?framing=long: %d %v", path, st, err)
		}
	}
	check(0, 256)
	check(1, int(cp.Size-256))

	for url, want := range map[string]int{
		"/v1/tile/entries/001":                        http.StatusNotFound, // past the tree
		fmt.Sprintf("/v1/tile/entries/001.p/%d", 255): http.StatusNotFound,
		"/v1/tile/entries/1":                          http.StatusNotFound, // not canonical
		"/v1/tile/entries/000.p/256":                  http.StatusNotFound,
		"/v1/tile/entries/000?framing=short":          http.StatusBadRequest,
		"/v1/tile/entries/000?x=1":                    http.StatusBadRequest,
		"/v1/tile/entries/x000/000":                   http.StatusNotFound,
	} {
		if st, _, body := get(t, base+url); st != want {
			t.Errorf("GET %s: %d %s, want %d", url, st, body, want)
		}
	}

	// A leaf over the C2SP framing's 65,535 bytes.
	big := post(t, base, opsrig.Env("big", "alice", "mcp/reject", []string{"p0"}, `{"reason":"`+strings.Repeat("x", 70000)+`"}`))
	proposalProof(t, base, "p0", big)
	bn, bw := int64(big-1)/256, int(big-1)%256+1
	path := evidence.EntriesPath(bn, bw)
	if st, _, body := get(t, base+"/v1/"+path); st != http.StatusConflict || !strings.Contains(string(body), "entry_too_long") {
		t.Fatalf("GET %s with a 70 kB leaf: %d %s", path, st, body)
	}
	st, _, body := get(t, base+"/v1/"+path+"?framing=long")
	leaves, err := evidence.SplitEntryBundle(body, evidence.FramingLong)
	if st != 200 || err != nil || len(leaves) != bw {
		t.Fatalf("GET %s?framing=long: %d %v", path, st, err)
	}
	if l, err := evidence.ParseLeaf(leaves[bw-1]); err != nil || l.Seq != big || len(l.Data) < 70000 {
		t.Fatalf("the long leaf: %v", err)
	}
}
