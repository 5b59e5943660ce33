package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/datalock"
	"github.com/mewledger/ledger/internal/ops/archive"
	"github.com/mewledger/ledger/internal/testkit/opsrig"
	"github.com/mewledger/ledger/internal/testkit/testctx"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// opsCmd is an ops command's run function.
type opsCmd = func(context.Context, env, []string) error

// opsRun runs an ops command with an empty stdin and returns its stdout
// and stderr.
func opsRun(t *testing.T, cmd opsCmd, args ...string) (string, string, error) {
	t.Helper()
	return opsRunIn(t, strings.NewReader(""), cmd, args...)
}

// opsRunIn runs an ops command reading stdin.
func opsRunIn(t *testing.T, stdin io.Reader, cmd opsCmd, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err := cmd(ctx, env{stdin: stdin, stdout: &out, stderr: &errb}, append([]string{"--progress", "off", "--log-level", "warn"}, args...))
	return out.String(), errb.String(), err
}

func opsMustRun(t *testing.T, cmd opsCmd, args ...string) (string, string) {
	t.Helper()
	return opsMustRunIn(t, strings.NewReader(""), cmd, args...)
}

func opsMustRunIn(t *testing.T, stdin io.Reader, cmd opsCmd, args ...string) (string, string) {
	t.Helper()
	out, errs, err := opsRunIn(t, stdin, cmd, args...)
	if err != nil {
		t.Fatalf("%v: %v\nstderr: %s", args, err, errs)
	}
	return out, errs
}

// TestOpsCommands drives every ops command end to end: export from a
// running ledger (--nats-url), verify the file, import it into a new data
// directory (embedded server started by the command), rebuild and verify
// the projection there offline, answer `at` queries, replay.
func TestOpsCommands(t *testing.T) {
	t.Setenv("LEDGER_DATA", "")
	t.Setenv("LEDGER_NATS_URL", "")
	src := opsrig.New(t)
	last := src.Traffic(t, 61, 200)
	url := src.Server.ClientURL()
	data := t.TempDir()
	file := filepath.Join(t.TempDir(), "ledger.jsonl")

	// export
	_, errs := opsMustRun(t, runExport, "--nats-url", url, "-f", file)
	if _, _, err := opsRun(t, runExport, "--nats-url", url, "-o", file); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-f FILE") {
		t.Fatalf("export -o FILE: %v, want a usage error pointing to -f", err)
	}
	if !strings.Contains(errs, "exported "+strconv.FormatUint(last, 10)+" messages") || !strings.Contains(errs, "head hash ") {
		t.Fatalf("export summary: %s", errs)
	}
	if _, err := os.Stat(file + ".partial"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partial file left: %v", err)
	}

	// verify --export
	out, _ := opsMustRun(t, runVerify, "--export", file)
	var vs struct {
		OK bool `json:"ok"`
		archive.Summary
	}
	if err := json.Unmarshal([]byte(out), &vs); err != nil || !vs.OK || vs.Lines != int(last) || !strings.Contains(errs, vs.Head) {
		t.Fatalf("verify --export: %s (%v)", out, err)
	}
	b, _ := os.ReadFile(file)
	lines := strings.SplitAfter(string(b), "\n")
	// Issue 15, item 7: a file whose chain holds by itself but is not the
	// export (here: its last lines cut off, the chain of a prefix) is
	// caught only against the head hash kept apart: --head.
	cut := filepath.Join(t.TempDir(), "cut.jsonl")
	if err := os.WriteFile(cut, []byte(strings.Join(lines[:len(lines)-3], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	opsMustRun(t, runVerify, "--export", cut)
	if _, _, err := opsRun(t, runVerify, "--export", cut, "--head", vs.Head); !errors.Is(err, errHeadMismatch) || !strings.Contains(err.Error(), vs.Head) {
		t.Fatalf("verify --head of a cut export: %v, want a head mismatch", err)
	}
	opsMustRun(t, runVerify, "--export", file, "--head", strings.ToUpper(vs.Head))
	lines[4] = strings.Replace(lines[4], `"seq":5,`, `"seq":6,`, 1)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := opsRun(t, runVerify, "--export", bad); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("verify of a tampered export: %v", err)
	}
	if _, _, err := opsRun(t, runImport, "-f", bad, "--data", data); !errors.Is(err, archive.ErrRefused) || !strings.Contains(err.Error(), "line 5") {
		t.Fatalf("import of a tampered export: %v", err)
	}

	// import into a new ledger (embedded server on <data>/nats), from stdin
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, _ = opsMustRunIn(t, f, runImport, "--data", data)
	var ir archive.ImportResult
	if err := json.Unmarshal([]byte(out), &ir); err != nil || ir.Imported != int(last) || ir.LastSeq != last {
		t.Fatalf("import: %s (%v)", out, err)
	}
	if _, _, err := opsRun(t, runImport, "-f", file, "--data", data); !errors.Is(err, archive.ErrNotEmpty) {
		t.Fatalf("second import without --append: %v", err)
	}

	// rebuild offline, then verify the projection
	out, _ = opsMustRun(t, runRebuild, "--data", data)
	if !strings.Contains(out, "up to seq "+strconv.FormatUint(last, 10)) {
		t.Fatalf("rebuild: %s", out)
	}
	out, _ = opsMustRun(t, runVerify, "--data", data)
	var vr struct {
		OK  bool   `json:"ok"`
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(out), &vr); err != nil || !vr.OK || vr.Seq != last {
		t.Fatalf("verify: %s (%v)", out, err)
	}
	// An explicit --data beats LEDGER_API: verify works offline on it
	// instead of on the (here unreachable) API of the environment.
	t.Setenv("LEDGER_API", "http://127.0.0.1:1")
	out, _ = opsMustRun(t, runVerify, "--data", data)
	if err := json.Unmarshal([]byte(out), &vr); err != nil || !vr.OK || vr.Seq != last {
		t.Fatalf("verify --data with LEDGER_API set: %s (%v)", out, err)
	}
	t.Setenv("LEDGER_API", "")
	// The rebuilt projection of the imported copy is the original's.
	s, err := projections.OpenStore(projections.StoreOptions{Dir: filepath.Join(data, "projection")})
	if err != nil {
		t.Fatal(err)
	}
	same := bytes.Equal(opsrig.Dump(t, s), opsrig.Dump(t, src.Fold(t, 0)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Fatal("projection of the imported ledger differs from the original's")
	}

	// at --seq N get / history / list / stats, against the original at N
	at9 := src.Fold(t, 9)
	out, errs = opsMustRun(t, runAt, "--data", data, "-o", "json", "--seq", "9", "get", "chained-2")
	var p api.Proposal
	want, _ := at9.Get("default", "chained-2")
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.State != api.StateRejected || p.Rejections[0].Explanation != "outside the sandbox" ||
		!p.UpdatedAt.Equal(want.UpdatedAt) || !strings.Contains(errs, "seq 9") {
		t.Fatalf("at --seq 9 get: %s %s (%v)", out, errs, err)
	}
	out, _ = opsMustRun(t, runAt, "--data", data, "--output", "json", "--seq", "8", "history", "chained-2")
	var h api.History
	if err := json.Unmarshal([]byte(out), &h); err != nil || len(h.Events) != 2 {
		t.Fatalf("at --seq 8 history: %s (%v)", out, err)
	}
	out, _ = opsMustRun(t, runAt, "--data", data, "-o", "json", "--seq", "5", "list", "--state", "pending")
	var l api.List
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Proposals) != 5 {
		t.Fatalf("at --seq 5 list: %s (%v)", out, err)
	}
	out, _ = opsMustRun(t, runAt, "--data", data, "-o", "json", "--time", time.Now().UTC().Format(time.RFC3339Nano), "stats", "--space", "other")
	var st api.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Events != 20 {
		t.Fatalf("at --time now stats: %s (%v)", out, err)
	}
	// The default output is the client commands' table; LEDGER_SPACE is
	// the space when --space is not given.
	out, _ = opsMustRun(t, runAt, "--data", data, "--seq", "9", "get", "chained-2")
	if !strings.Contains(out, "State      rejected") || !strings.Contains(out, "outside the sandbox") {
		t.Fatalf("at get, table: %s", out)
	}
	t.Setenv("LEDGER_SPACE", "other")
	out, _ = opsMustRun(t, runAt, "--data", data, "--time", time.Now().UTC().Format(time.RFC3339Nano), "stats")
	if !strings.HasPrefix(out, "Space other: ") || !strings.Contains(out, " 20 events") {
		t.Fatalf("at stats with LEDGER_SPACE=other, table: %s", out)
	}
	t.Setenv("LEDGER_SPACE", "")
	if _, _, err := opsRun(t, runAt, "--data", data, "--seq", strconv.FormatUint(last+1, 10), "stats"); !errors.Is(err, projector.ErrBeyondLog) {
		t.Fatalf("at beyond the log: %v", err)
	}
	if _, _, err := opsRun(t, runAt, "--data", data, "--seq", "3", "get", "chained-2"); !errors.Is(err, projections.ErrNotFound) {
		t.Fatalf("at --seq 3, before the proposal: %v", err)
	}

	// replay --proposal with its chained events, and a seq range
	out, _ = opsMustRun(t, runReplay, "--data", data, "--proposal", "chained-2")
	if n := strings.Count(out, "\n"); n != 3 || !strings.Contains(out, `\"id\":\"chained-2-why\"`) {
		t.Fatalf("replay --proposal: %s", out)
	}
	out, _ = opsMustRun(t, runReplay, "--data", data, "--since", "2", "--until", "4", "--type", "proposal")
	if n := strings.Count(out, "\n"); n != 3 || !strings.HasPrefix(out, `{"seq":2,`) {
		t.Fatalf("replay --since 2 --until 4: %s", out)
	}

	// republish to another server
	var mu sync.Mutex
	var got []string
	sub, err := src.NC.Subscribe("copy.>", func(m *nats.Msg) {
		mu.Lock()
		got = append(got, m.Subject)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := src.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	_, errs = opsMustRun(t, runReplay, "--data", data, "--space", "other", "--republish-to", "copy", "--republish-url", url)
	if !strings.Contains(errs, "republished 20 messages") {
		t.Fatalf("republish: %s", errs)
	}
	for deadline := testctx.Deadline(t); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d republished messages, want 20", n)
		}
	}

	if err := os.WriteFile(filepath.Join(data, "serve.addr.json"), []byte(`{"http":"127.0.0.1:1","nats":"nats://127.0.0.1:1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A running `ledger serve` on --data (its address file, and its lock
	// held): rebuild and verify go online, through its API (which does
	// not answer here).
	held, err := datalock.Acquire(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []opsCmd{runRebuild, runVerify} {
		if _, _, err := opsRun(t, cmd, "--data", data); !errors.As(err, new(*unreachableError)) || !strings.Contains(err.Error(), "http://127.0.0.1:1") {
			t.Fatalf("rebuild/verify with serve running: %v, want its API unreachable", err)
		}
	}
	if _, _, err := opsRun(t, runExport, "--data", data); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("export with an unanswering server: %v", err)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	// The same address file without a holder of the lock is a killed
	// serve's leftover: not believed, the commands work offline.
	if _, errs := opsMustRun(t, runExport, "--data", data, "-f", filepath.Join(t.TempDir(), "e.ndjson")); !strings.Contains(errs, "head") {
		t.Fatalf("export with a stale address file: %s", errs)
	}
}

func TestParseSeqOrTime(t *testing.T) {
	if n, tm, err := parseSeqOrTime("42"); n != 42 || !tm.IsZero() || err != nil {
		t.Fatal(n, tm, err)
	}
	if n, tm, err := parseSeqOrTime("2026-01-02T03:04:05.5+01:00"); n != 0 || !tm.Equal(time.Date(2026, 1, 2, 2, 4, 5, 5e8, time.UTC)) || err != nil {
		t.Fatal(n, tm, err)
	}
	if _, tm, err := parseSeqOrTime("2026-01-02"); !tm.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) || err != nil {
		t.Fatal(tm, err)
	}
	for _, bad := range []string{"0", "-1", "yesterday"} {
		if _, _, err := parseSeqOrTime(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
