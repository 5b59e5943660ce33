package proofs_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	tdlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/server/proofs"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/subjects"
)

// fast makes checkpoints every 20 ms.
func fast(o *app.Options) { o.CheckpointInterval = 20 * time.Millisecond }

func get(t testing.TB, url string) (int, http.Header, []byte) {
	t.Helper()
	return apitest.GetRaw(t, url)
}

// post appends one envelope over HTTP and returns its sequence.
func post(t testing.TB, base, env string) uint64 {
	t.Helper()
	return apitest.PostEnvelope(t, base, env)
}

// proposalProof waits (min_seq) for seq and gets the proposal's bundle
// against a checkpoint of at least seq leaves.
func proposalProof(t testing.TB, base, id string, seq uint64) *evidence.Bundle {
	t.Helper()
	deadline := testctx.Deadline(t)
	for {
		if st, _, body := get(t, fmt.Sprintf("%s/v1/proposals/%s/history?min_seq=%d", base, id, seq)); st != 200 {
			t.Fatalf("history: %d %s", st, body)
		}
		st, _, body := get(t, base+"/v1/proposals/"+id+"/proof")
		if st == http.StatusOK {
			b, err := evidence.ParseBundle(body)
			if err != nil {
				t.Fatal(err)
			}
			if b.TreeSize >= int64(seq) {
				return b
			}
		} else if st != http.StatusServiceUnavailable {
			t.Fatalf("proof of %s: %d %s", id, st, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("proof of %s: no checkpoint covers seq %d", id, seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func history(base string) []string {
	return []string{
		opsrig.Env("p1", "alice", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"rm"}}`),
		opsrig.Env("other", "bob", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`),
		opsrig.Env("p1-rej", "fs-agent", "mcp/reject", []string{"p1"}, `{"reason":"unsafe"}`),
		opsrig.Env("p1-f", "human", "mcp/request", []string{"p1"}, `{"method":"tools/call","params":{"name":"rm"}}`),
	}
}

// TestProposalProofIndependent: a proposal's proof, served over HTTP,
// verifies with the verifier key the ledger serves, and every part of it
// also with an independent implementation: the checkpoint with
// transparency-dev/formats/log, each inclusion proof with
// transparency-dev/merkle; the tiles give the signed root; consistency
// proofs between two checkpoints verify with both.
func TestProposalProofIndependent(t *testing.T) {
	a := apptest.Start(t, fast)
	base := a.HTTPURL()
	// A watcher of the checkpoints, on NATS.
	nc, err := nats.Connect(a.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	published, err := nc.SubscribeSync(subjects.CheckpointWildcard)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for _, env := range history(base) {
		last = post(t, base, env)
	}
	_, _, firstList := get(t, base+"/v1/checkpoints")
	b := proposalProof(t, base, "p1", last)
	st, _, vkeyB := get(t, base+"/v1/checkpoint/key")
	vkey := strings.TrimSpace(string(vkeyB))
	if st != 200 || vkey != a.Proofs().VerifierKey() {
		t.Fatalf("GET /v1/checkpoint/key: %d %q", st, vkeyB)
	}
	got, err := evidence.VerifyBundle(b, vkey)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, l := range got.Leaves {
		seqs = append(seqs, l.Seq)
	}
	if fmt.Sprint(seqs) != "[1 3 4]" || b.Proposal != "p1" || b.Space != "default" {
		t.Fatalf("bundle of p1 holds seqs %v (%s/%s), want [1 3 4]", seqs, b.Space, b.Proposal)
	}

	// Independently: the checkpoint, then each inclusion proof.
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _, err := tdlog.ParseCheckpoint([]byte(b.Checkpoint), v.Name(), v)
	if err != nil {
		t.Fatalf("transparency-dev/formats: %v", err)
	}
	for _, e := range b.Events {
		leaf, _ := base64.StdEncoding.DecodeString(e.Leaf)
		ps, _ := evidence.ParseHashes(e.Proof)
		var pb [][]byte
		for i := range ps {
			pb = append(pb, ps[i][:])
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, e.Seq-1, cp.Size, rfc6962.DefaultHasher.HashLeaf(leaf), pb, cp.Hash); err != nil {
			t.Fatalf("seq %d: transparency-dev/merkle: %v", e.Seq, err)
		}
		// The leaf holds the stored message: its bytes and subject are
		// what GET /v1/events/{seq} serves.
		l, _ := evidence.ParseLeaf(leaf)
		if l.Header(evidence.HeaderMsgID) == "" || !strings.Contains(string(l.Data), `"id":"p1`) {
			t.Fatalf("seq %d: leaf %+v", e.Seq, l)
		}
	}

	// The latest checkpoint is text/plain and opens with the key.
	st, h, note1 := get(t, base+"/v1/checkpoint")
	if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /v1/checkpoint: %d %s", st, h.Get("Content-Type"))
	}
	latest, _, err := evidence.OpenCheckpoint(note1, v)
	if err != nil || latest.Size < int64(last) {
		t.Fatalf("latest checkpoint %v: %v", latest, err)
	}

	// Each checkpoint is published on ledger.checkpoint.<origin>.
	for {
		m, err := published.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("no checkpoint of %d leaves published: %v", latest.Size, err)
		}
		pc, _, err := evidence.OpenCheckpoint(m.Data, v)
		if err != nil || m.Subject != subjects.Checkpoint(v.Name()) {
			t.Fatalf("published on %s: %v", m.Subject, err)
		}
		if pc.Size >= int64(last) {
			break
		}
	}

	// The tiles give the signed root.
	tr := tlog.TileHashReader(latest.Tree(), httpTiles{t: t, base: base})
	if root, err := tlog.TreeHash(latest.Size, tr); err != nil || root != latest.Hash {
		t.Fatalf("root from the tiles %s (%v), signed %s", root, err, latest.Hash)
	}
	st, h, _ = get(t, base+"/v1/tile/0/000.p/"+fmt.Sprint(latest.Size))
	if st != 200 || !strings.Contains(h.Get("Cache-Control"), "immutable") {
		t.Fatalf("tile: %d %q", st, h.Get("Cache-Control"))
	}
	if st, _, _ := get(t, base+"/v1/tile/0/000.p/"+fmt.Sprint(latest.Size+1)); st != http.StatusNotFound {
		t.Fatalf("a tile past the tree: %d", st)
	}

	// Consistency between the first checkpoint listed and the latest.
	var first evidence.CheckpointList
	if err := json.Unmarshal(firstList, &first); err != nil || len(first.Checkpoints) == 0 {
		t.Fatalf("checkpoints: %s %v", firstList, err)
	}
	old, _, err := evidence.OpenCheckpoint([]byte(first.Checkpoints[len(first.Checkpoints)-1].Note), v)
	if err != nil {
		t.Fatal(err)
	}
	st, _, body := get(t, fmt.Sprintf("%s/v1/proof/consistency?from=%d&to=%d", base, old.Size, latest.Size))
	var cpr evidence.ConsistencyProof
	if err := json.Unmarshal(body, &cpr); st != 200 || err != nil {
		t.Fatalf("consistency: %d %s", st, body)
	}
	ps, _ := evidence.ParseHashes(cpr.Proof)
	if err := evidence.VerifyConsistency(old, latest, ps); err != nil {
		t.Fatal(err)
	}
	if old.Size > 0 && old.Size < latest.Size {
		var pb [][]byte
		for i := range ps {
			pb = append(pb, ps[i][:])
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(old.Size), uint64(latest.Size), pb, old.Hash[:], latest.Hash[:]); err != nil {
			t.Fatalf("transparency-dev/merkle: %v", err)
		}
	}
	// One sequence's inclusion proof, with its checkpoint.
	st, _, body = get(t, base+"/v1/proof/inclusion?seq=2")
	var ip evidence.InclusionProof
	if err := json.Unmarshal(body, &ip); st != 200 || err != nil {
		t.Fatalf("inclusion: %d %s", st, body)
	}
	icp, _, err := evidence.OpenCheckpoint([]byte(ip.Checkpoint), v)
	if err != nil {
		t.Fatal(err)
	}
	lh, _ := tlog.ParseHash(ip.LeafHash)
	ips, _ := evidence.ParseHashes(ip.Proof)
	if err := evidence.VerifyInclusion(icp, ip.LeafIndex, lh, ips); err != nil || ip.Seq != 2 || ip.TreeSize != icp.Size {
		t.Fatalf("inclusion of seq 2: %+v: %v", ip, err)
	}
	var ipb [][]byte
	for i := range ips {
		ipb = append(ipb, ips[i][:])
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 1, uint64(icp.Size), lh[:], ipb, icp.Hash[:]); err != nil {
		t.Fatalf("inclusion of seq 2: transparency-dev: %v", err)
	}

	// Every checkpoint is kept and listed, smallest first.
	_, _, all := get(t, base+"/v1/checkpoints?from=0&limit=1000")
	var list evidence.CheckpointList
	_ = json.Unmarshal(all, &list)
	if n := len(list.Checkpoints); n < 2 || list.Checkpoints[n-1].Size != latest.Size || list.Checkpoints[0].Size > list.Checkpoints[n-1].Size {
		t.Fatalf("checkpoint list %s", all)
	}

	// Bad requests name what is wrong.
	for url, want := range map[string]int{
		"/v1/proposals/nope/proof":              404,
		"/v1/proposals/p1/proof?size=999999":    404,
		"/v1/proof/consistency?from=5":          400,
		"/v1/proof/consistency?from=5&to=2":     400,
		"/v1/proof/consistency?from=1&to=99999": 404,
		"/v1/tile/entries/000":                  404,
		"/v1/proof/inclusion":                   400,
		"/v1/proof/inclusion?seq=0":             400,
		"/v1/proof/inclusion?seq=99999&size=1":  404,
		"/v1/checkpoint?x=1":                    400,
	} {
		if st, _, body := get(t, base+url); st != want {
			t.Errorf("GET %s: %d %s, want %d", url, st, body, want)
		}
	}
}

// httpTiles reads tiles from the ledger's /v1/tile/.
type httpTiles struct {
	t    testing.TB
	base string
}

func (h httpTiles) Height() int { return evidence.TileHeight }
func (h httpTiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, t := range ts {
		st, _, body := get(h.t, h.base+"/v1/"+evidence.TilePath(t))
		if st != 200 {
			return nil, fmt.Errorf("GET %s: %d %s", evidence.TilePath(t), st, body)
		}
		out[i] = body
	}
	return out, nil
}
func (h httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// TestForkAndShrink: a log rewritten behind an auditor's back, signed
// with the same key, is caught by the consistency check against the
// checkpoint the auditor kept: another history (the stream deleted and
// recreated) is a fork, the same size with other content a rewrite, a
// shorter log a shrink.
func TestForkAndShrink(t *testing.T) {
	keyFile := t.TempDir() + "/checkpoint.key"
	withKey := func(o *app.Options) { fast(o); o.CheckpointKeyFile = keyFile }
	// The key shared by both ledgers: the operator's.
	if _, err := generateKey(keyFile); err != nil {
		t.Fatal(err)
	}
	a := apptest.Start(t, withKey)
	var last uint64
	for _, env := range history(a.HTTPURL()) {
		last = post(t, a.HTTPURL(), env)
	}
	kept := proposalProof(t, a.HTTPURL(), "p1", last) // the auditor keeps its checkpoint
	v := a.Proofs().Verifier()
	old, _, err := evidence.OpenCheckpoint([]byte(kept.Checkpoint), v)
	if err != nil {
		t.Fatal(err)
	}

	// The "recreated stream": another ledger, same key, another history.
	b := apptest.Start(t, withKey)
	other := history(b.HTTPURL())
	other[1] = opsrig.Env("other", "mallory", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`)
	for _, env := range other {
		last = post(t, b.HTTPURL(), env)
	}
	for i := 0; i < 3; i++ {
		last = post(t, b.HTTPURL(), opsrig.Env(fmt.Sprintf("more-%d", i), "bob", "mcp/proposal", nil, `{"method":"tools/call","params":{"name":"ls"}}`))
	}
	newer := proposalProof(t, b.HTTPURL(), "p1", last)
	cp, _, err := evidence.OpenCheckpoint([]byte(newer.Checkpoint), v) // signed: the same key
	if err != nil {
		t.Fatal(err)
	}
	st, _, body := get(t, fmt.Sprintf("%s/v1/proof/consistency?from=%d&to=%d", b.HTTPURL(), old.Size, cp.Size))
	var cpr evidence.ConsistencyProof
	if err := json.Unmarshal(body, &cpr); st != 200 || err != nil {
		t.Fatalf("consistency: %d %s", st, body)
	}
	ps, _ := evidence.ParseHashes(cpr.Proof)
	if err := evidence.VerifyConsistency(old, cp, ps); !errors.Is(err, evidence.ErrForked) || errors.Is(err, evidence.ErrRewritten) {
		t.Fatalf("another history: %v, want ErrForked", err)
	}
	// Its checkpoint of the same size as the one kept: a rewrite.
	same := signedAt(t, b, old.Size)
	if err := evidence.VerifyConsistency(old, same, nil); !errors.Is(err, evidence.ErrRewritten) {
		t.Fatalf("same size, other root: %v, want ErrRewritten", err)
	}
	// A shorter log: a shrink.
	short := signedAt(t, b, old.Size-1)
	if err := evidence.VerifyConsistency(old, short, nil); !errors.Is(err, evidence.ErrShrank) {
		t.Fatalf("shorter: %v, want ErrShrank", err)
	}
	// The proof of p1 from the rewritten log fails against the kept
	// checkpoint: its seq 2 changed, so the sibling hashes differ.
	newer.Checkpoint, newer.TreeSize, newer.RootHash = kept.Checkpoint, kept.TreeSize, kept.RootHash
	if _, err := evidence.VerifyBundle(newer, a.Proofs().VerifierKey()); !errors.Is(err, evidence.ErrInclusion) {
		t.Fatalf("rewritten log's proof against the kept checkpoint: %v", err)
	}
}

// signedAt returns a's checkpoint of size n (via the proofs service's own
// signing of its tree).
func signedAt(t *testing.T, a *app.App, n int64) evidence.Checkpoint {
	t.Helper()
	root, err := a.Store().TreeHash(n)
	if err != nil {
		t.Fatal(err)
	}
	return evidence.Checkpoint{Origin: a.Proofs().Origin(), Size: n, Hash: root}
}

func generateKey(path string) (string, error) {
	return proofs.GenerateKeyFile(path, "test.example/ledger")
}
