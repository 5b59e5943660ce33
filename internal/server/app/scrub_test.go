package app_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/blockfile"
	"github.com/mewledger/ledger/subjects"
)

// scrubOptions: a small scrub bound for tests (every pass, unbounded
// rate, the tail every 50ms).
func scrubOptions(t *testing.T) app.Options {
	o := apptest.Options(t)
	o.CheckpointInterval = 50 * time.Millisecond
	o.ScrubPeriod = 100 * time.Millisecond
	o.ScrubRate = -1
	return o
}

func scrubProposal(i int) string {
	return fmt.Sprintf(`{"protocol":"mew/v0.4","id":"scrub-%d","from":"untrusted-agent","to":["target-agent"],"kind":"mcp/proposal","payload":{"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/tmp/f%02d"}}}}`, i, i)
}

// appendN appends n proposals (ids scrub-<from>..) as one NDJSON post.
func appendN(t *testing.T, a *app.App, from, n int) {
	t.Helper()
	var body bytes.Buffer
	for i := from; i < from+n; i++ {
		body.WriteString(scrubProposal(i) + "\n")
	}
	resp, err := http.Post(a.HTTPURL()+"/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 || strings.Contains(string(b), `"error"`) {
		t.Fatalf("append: %d %s", resp.StatusCode, b)
	}
}

func getJSON(t *testing.T, url string, v any) (int, http.Header, string) {
	t.Helper()
	return apitest.GetJSON(t, url, v)
}

// waitCond polls cond for at most a minute.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
	}
}

func status(t *testing.T, a *app.App) api.Status {
	t.Helper()
	return apitest.StatusOf(t, a.HTTPURL())
}

// fillScrubbed appends n proposals and waits until they are folded, signed and
// scrubbed.
func fillScrubbed(t *testing.T, a *app.App, n int) {
	t.Helper()
	appendN(t, a, 1, n)
	waitCond(t, "all folded, signed and scrubbed", func() bool {
		st := status(t, a)
		e, ok := a.Proofs().Log().Latest()
		return st.ProjectedSeq == uint64(n) && ok && e.Checkpoint.Size == int64(n) && st.Scrub != nil && st.Scrub.Passes > 0
	})
}

// fillAndStop appends n proposals, waits until they are folded, signed
// and scrubbed, and stops the ledger.
func fillAndStop(t *testing.T, o app.Options, n int) {
	t.Helper()
	a := apptest.StartWith(t, o)
	fillScrubbed(t, a, n)
	if st := status(t, a); st.LogDamage != nil || st.LogProblem != "" {
		t.Fatalf("damage before any: %+v", st)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// The JetStream file store damaged while the ledger is stopped, each way
// storage really breaks: found by the scrub, named in /v1/status and by
// /readyz, every proof that meets it is 409 log_damaged, nothing is
// signed past it, reads go on marked; the block put back clears it.
func TestScrubFindsDamageWhileStopped(t *testing.T) {
	const n, bad = 30, 17
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, store string)
		repair func(t *testing.T, store string) // in place, while serving
		kind   string
		seq    uint64
	}{
		{"checksum fails", func(t *testing.T, store string) {
			if err := blockfile.FlipByte(store, subjects.StreamName, bad); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, store string) {
			if err := blockfile.FlipByte(store, subjects.StreamName, bad); err != nil {
				t.Fatal(err)
			}
		}, api.DamageMissing, bad},
		{"rewritten with a valid checksum", func(t *testing.T, store string) {
			if err := blockfile.Rewrite(store, subjects.StreamName, bad, func(b []byte) []byte {
				return bytes.Replace(b, []byte("/tmp/f17"), []byte("/etc/pwd"), 1)
			}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, store string) {
			if err := blockfile.Rewrite(store, subjects.StreamName, bad, func(b []byte) []byte {
				return bytes.Replace(b, []byte("/etc/pwd"), []byte("/tmp/f17"), 1)
			}); err != nil {
				t.Fatal(err)
			}
		}, api.DamageAltered, bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := scrubOptions(t)
			fillAndStop(t, o, n)
			tc.damage(t, o.NATSDir())

			a := apptest.StartWith(t, o)
			var ready api.Ready
			waitCond(t, "/readyz 503 log_damaged", func() bool {
				code, _, _ := getJSON(t, a.HTTPURL()+"/readyz", &ready)
				return code == http.StatusServiceUnavailable && ready.Error != nil && ready.Error.Code == api.CodeLogDamaged
			})
			st := status(t, a)
			t.Logf("/v1/status: log_problem %q, damage %+v, signing %+v, scrub %+v", st.LogProblem, st.LogDamage, st.SigningStopped, st.Scrub)
			if st.LogDamage == nil || st.LogDamage.Kind != tc.kind || st.LogDamage.Seq != tc.seq || !strings.Contains(st.LogProblem, fmt.Sprintf("seq %d", tc.seq)) {
				t.Fatalf("/v1/status: %+v, want %s damage at seq %d", st, tc.kind, tc.seq)
			}
			if tc.kind == api.DamageAltered && (st.LogDamage.Expected == "" || st.LogDamage.Found == "" || st.LogDamage.Expected == st.LogDamage.Found) {
				t.Fatalf("altered without both leaf hashes: %+v", st.LogDamage)
			}
			// The proof of the damaged proposal: 409 log_damaged.
			var eb api.ErrorBody
			code, hdr, body := getJSON(t, a.HTTPURL()+fmt.Sprintf("/v1/proposals/scrub-%d/proof", bad), &eb)
			if code != http.StatusConflict || eb.Error == nil || eb.Error.Code != api.CodeLogDamaged || eb.Error.Damage == nil || eb.Error.Damage.Seq != tc.seq {
				t.Fatalf("proof of the damaged proposal: %d %s", code, body)
			}
			if hdr.Get(api.HeaderLogDamaged) == "" {
				t.Fatalf("answer not marked as from a damaged log: %v", hdr)
			}
			code, _, body = getJSON(t, a.HTTPURL()+fmt.Sprintf("/v1/proof/inclusion?seq=%d", bad), &eb)
			if code != http.StatusConflict || eb.Error == nil || eb.Error.Code != api.CodeLogDamaged {
				t.Fatalf("inclusion of the damaged seq: %d %s", code, body)
			}
			// An innocent proposal's proof is still served; reads go on,
			// marked.
			if code, _, body := getJSON(t, a.HTTPURL()+"/v1/proposals/scrub-3/proof", nil); code != 200 {
				t.Fatalf("proof of an innocent proposal: %d %s", code, body)
			}
			code, hdr, body = getJSON(t, a.HTTPURL()+"/v1/proposals/scrub-3", nil)
			if code != 200 || hdr.Get(api.HeaderLogDamaged) == "" {
				t.Fatalf("read on a damaged log: %d %v %s", code, hdr, body)
			}
			// Nothing signed past the damage, even as the log grows.
			appendN(t, a, 100, 5)
			waitCond(t, "the new events folded and scrubbed", func() bool {
				st := status(t, a)
				return st.ProjectedSeq == n+5 && st.Scrub.CheckedThrough >= n+5
			})
			if e, _ := a.Proofs().Log().Latest(); e.Checkpoint.Size > n {
				t.Fatalf("signed size %d past the damage at %d", e.Checkpoint.Size, tc.seq)
			}
			if st := status(t, a); st.SigningStopped == nil || !strings.Contains(st.SigningStopped.Reason, fmt.Sprintf("seq %d", tc.seq)) {
				t.Fatalf("signing_stopped: %+v", st.SigningStopped)
			}
			// Repair in place while serving: once the store reads the
			// block again, the scrub's re-check clears the damage and
			// signing resumes, with no restart.
			tc.repair(t, o.NATSDir())
			waitCond(t, "/readyz 200 after the repair", func() bool {
				code, _, _ := getJSON(t, a.HTTPURL()+"/readyz", &ready)
				return code == http.StatusOK
			})
			waitCond(t, "a checkpoint of the grown log", func() bool {
				e, _ := a.Proofs().Log().Latest()
				return e.Checkpoint.Size == n+5
			})
			if st := status(t, a); st.LogDamage != nil || st.SigningStopped != nil {
				t.Fatalf("after the repair: %+v", st)
			}
			if code, _, body := getJSON(t, a.HTTPURL()+fmt.Sprintf("/v1/proposals/scrub-%d/proof", bad), nil); code != 200 {
				t.Fatalf("proof after the repair: %d %s", code, body)
			}
		})
	}
}

// A truncated block and a removed block file while the ledger is
// stopped: the start does not fail, the missing sequence is named and
// /readyz is 503.
func TestScrubFindsLostBlocks(t *testing.T) {
	const n, bad = 30, 17
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, store string)
		seq    uint64
	}{
		{"truncated block", func(t *testing.T, store string) {
			if err := blockfile.Truncate(store, subjects.StreamName, bad); err != nil {
				t.Fatal(err)
			}
		}, bad},
		{"block file removed", func(t *testing.T, store string) {
			blocks, err := blockfile.Blocks(store, subjects.StreamName)
			if err != nil || len(blocks) == 0 {
				t.Fatalf("blocks: %v %v", blocks, err)
			}
			if err := os.Remove(blocks[0]); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := scrubOptions(t)
			fillAndStop(t, o, n)
			tc.damage(t, o.NATSDir())
			a := apptest.StartWith(t, o)
			var ready api.Ready
			waitCond(t, "/readyz 503 log_damaged", func() bool {
				code, _, _ := getJSON(t, a.HTTPURL()+"/readyz", &ready)
				return code == http.StatusServiceUnavailable && ready.Error != nil && ready.Error.Code == api.CodeLogDamaged
			})
			st := status(t, a)
			t.Logf("/v1/status: %+v %+v", st, st.LogDamage)
			if st.LogDamage == nil || st.LogDamage.Kind != api.DamageMissing || st.LogDamage.Seq != tc.seq {
				t.Fatalf("/v1/status: %+v, want missing damage at seq %d", st.LogDamage, tc.seq)
			}
		})
	}
}

// Issue 33's smaller items: an inclusion proof beyond the log is 404
// not_found, a tile path with a width out of 1..255 says so, and
// /v1/status serves the import boundary.
func TestProofRoutesNameWhatIsWrong(t *testing.T) {
	a := apptest.StartWith(t, scrubOptions(t))
	appendN(t, a, 1, 3)
	waitCond(t, "a checkpoint of 3", func() bool {
		e, ok := a.Proofs().Log().Latest()
		return ok && e.Checkpoint.Size == 3
	})
	var eb api.ErrorBody
	if code, _, body := getJSON(t, a.HTTPURL()+"/v1/proof/inclusion?seq=99", &eb); code != http.StatusNotFound || eb.Error == nil || eb.Error.Code != api.CodeNotFound || !strings.Contains(eb.Error.Message, "beyond the log") {
		t.Fatalf("inclusion beyond the log: %d %s", code, body)
	}
	for _, w := range []string{"0", "256"} {
		code, _, body := getJSON(t, a.HTTPURL()+"/v1/tile/0/000.p/"+w, &eb)
		if code != http.StatusNotFound || !strings.Contains(body, "width must be 1..255, not "+w) {
			t.Fatalf("tile width %s: %d %s", w, code, body)
		}
	}
	st := status(t, a)
	if st.Import == nil || st.Import.ImportedThrough != 0 || st.Import.OriginalTimeHeader != "Ledger-Original-Time" || st.Import.OriginalIDHeader != "Ledger-Original-Msg-Id" {
		t.Fatalf("import boundary %+v", st.Import)
	}
}

// A record rewritten (valid checksum) under a running ledger: found once
// the store reads the block again, with no restart.
func TestScrubFindsDamageWhileServing(t *testing.T) {
	const n, bad = 30, 9
	a := apptest.StartWith(t, scrubOptions(t))
	appendN(t, a, 1, n)
	waitCond(t, "all folded and signed", func() bool {
		e, ok := a.Proofs().Log().Latest()
		return ok && e.Checkpoint.Size == n
	})
	if err := blockfile.Rewrite(a.Options().NATSDir(), subjects.StreamName, bad, func(b []byte) []byte {
		return bytes.Replace(b, []byte("/tmp/f09"), []byte("/etc/pwd"), 1)
	}); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the damage found while serving", func() bool {
		d, ok := a.LogDamage()
		return ok && d.Kind == api.DamageAltered && d.Seq == bad
	})
	var ready api.Ready
	if code, _, body := getJSON(t, a.HTTPURL()+"/readyz", &ready); code != http.StatusServiceUnavailable || ready.Error == nil || ready.Error.Code != api.CodeLogDamaged {
		t.Fatalf("/readyz: %d %s", code, body)
	}
}
