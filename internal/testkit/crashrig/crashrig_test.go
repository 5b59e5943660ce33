package crashrig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/crashrig"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// Crash test sizing: about 50,000 events from 4 publishers, 3 SIGKILLs.
const (
	crashPublishers   = 4
	crashPerPublisher = 12_500
	crashKills        = 3
	// crashSyncInterval is the embedded server's fsync setting. A SIGKILL
	// of the process loses nothing JetStream acknowledged whatever the
	// interval: a single-replica stream writes each message to the OS
	// before acknowledging it (nats-server flushes in place unless the
	// stream is replicated), and the OS outlives the process. The interval
	// only matters when the machine itself goes down, which a test cannot
	// do; "always" fsyncs every message (~8 ms each on a small CI disk:
	// 50,000 would take minutes), so the big run uses an interval and
	// TestCrashConsistencySyncAlways covers the default setting.
	crashSyncInterval = "10s"
)

// publisher appends its envelopes until every one is acknowledged,
// appending again whatever was not (same bytes, same Nats-Msg-Id).
type publisher struct {
	id     int
	raws   [][]byte
	acked  map[string]uint64 // envelope id → seq the stream acknowledged
	rounds int
	// retried counts appends that took more than one attempt, dupAnswers
	// those answered "duplicate" (a lost ack's retry), again those the
	// publisher had to append again after the Appender gave up.
	retried, dupAnswers, again int
	err                        error
}

func (p *publisher) run(ctx context.Context, a *appendlog.Appender) {
	pending := p.raws
	for len(pending) > 0 {
		if ctx.Err() != nil {
			p.err = fmt.Errorf("publisher %d: %d envelopes never acknowledged: %w", p.id, len(pending), ctx.Err())
			return
		}
		p.rounds++
		n := min(len(pending), 1000)
		chunk := pending[:n]
		var again [][]byte
		for j, r := range a.AppendMany(ctx, "", chunk) {
			if r.Err != nil {
				if errors.Is(r.Err, ledger.ErrRefused) {
					p.err = fmt.Errorf("publisher %d: valid envelope refused: %w", p.id, r.Err)
					return
				}
				again = append(again, chunk[j])
				p.again++
				continue
			}
			if r.Attempts > 1 {
				p.retried++
			}
			if r.Duplicate {
				p.dupAnswers++
			}
			if prev, ok := p.acked[r.ID]; ok && prev != r.Seq {
				p.err = fmt.Errorf("publisher %d: %q acknowledged at seq %d and %d", p.id, r.ID, prev, r.Seq)
				return
			}
			p.acked[r.ID] = r.Seq
		}
		pending = append(again, pending[n:]...)
		if len(again) > 0 {
			time.Sleep(50 * time.Millisecond) // the server is restarting
		}
	}
}

// status reads /v1/status.
func status(apiURL string) (api.Status, error) {
	var st api.Status
	resp, err := http.Get(apiURL + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// TestCrashConsistency runs `ledger serve` as a real process, appends about
// 50,000 events from concurrent publishers with async acks, SIGKILLs the
// server at random moments three times (restarting it on the same data
// directory; publishers append again what was not acknowledged), and then
// checks, offline, that every acknowledged event is in the stream exactly
// once (at the sequence its ack named), that the projection equals a fresh
// rebuild of the stream, that no event was applied twice (stats and history
// counts match the stream), and that no orphan waits for a target that
// exists.
func TestCrashConsistency(t *testing.T) {
	runCrash(t, crashPublishers, crashPerPublisher, crashKills, crashSyncInterval)
}

// TestCrashConsistencySyncAlways is the same with the product default,
// fsync before every acknowledgement, on a smaller log: two kills. The
// publishers' Appenders write through the group commit (atomic batches,
// one fsync each), so the kills land in batched load.
func TestCrashConsistencySyncAlways(t *testing.T) {
	runCrash(t, 4, 5_000, 2, "always")
}

func runCrash(t *testing.T, publishers, perPublisher, kills int, syncInterval string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (kill moments)", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	// Built without -race even under -race: the server's throughput is
	// what the test needs (cmd/ledger's e2e test runs a -race binary).
	bin := crashrig.Build(t, t.TempDir(), false)
	verifier := crashrig.BuildPkg(t, t.TempDir(), "./internal/testkit/crashrig/cmd/crashverify", "crashverify", false)
	data := t.TempDir()
	args := []string{"--nats-listen", crashrig.NATSListen(crashrig.FreePort(t)), "--sync-interval", syncInterval, "--log-level", "warn"}
	start := time.Now()
	srv := crashrig.StartServe(t, bin, data, args...)
	natsURL := srv.Addr.NATS

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pubs := make([]*publisher, publishers)
	var wg sync.WaitGroup
	for i := range pubs {
		g := workload.New(workload.Options{Seed: int64(1000 + i), Prefix: fmt.Sprintf("P%d-", i), Disorder: 5,
			Mix: workload.Mix{Fulfil: 15, Withdraw: 10, Reject: 10, Response: 5, Chat: 5}})
		pubs[i] = &publisher{id: i, raws: g.Batch(perPublisher), acked: map[string]uint64{}}
		_, js := natstest.ConnectURL(t, natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
			nats.ReconnectJitter(0, 0), nats.Timeout(2*time.Second))
		a, err := appendlog.NewAppender(js, appendlog.AppenderOptions{AckTimeout: 2 * time.Second, MaxRetries: 2,
			RetryWait: 100 * time.Millisecond, MaxInFlight: 256})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pubs[i].run(ctx, a)
		}()
	}
	published := make(chan struct{})
	go func() { wg.Wait(); close(published) }()

	// The killer: SIGKILL at a random moment, restart on the same data
	// directory, again.
	var recoveries []time.Duration
	var killedAt []uint64
	for k := range kills {
		wait := time.Duration(200+rnd.IntN(1300)) * time.Millisecond
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			t.Fatal("timed out before the kills")
		}
		st, _ := status(srv.API())
		srv.Kill()
		t0 := time.Now()
		killedAt = append(killedAt, st.StreamSeq)
		srv = crashrig.StartServe(t, bin, data, args...)
		recoveries = append(recoveries, time.Since(t0))
		t.Logf("kill %d at stream seq ~%d (after %v): serving again after %v", k+1, st.StreamSeq, wait, recoveries[k])
	}
	select {
	case <-published:
	case <-ctx.Done():
		t.Fatal("publishers did not finish in time")
	}
	for _, p := range pubs {
		if p.err != nil {
			t.Fatal(p.err)
		}
	}
	publishedIn := time.Since(start)

	// Wait for the projection to catch up, then stop cleanly.
	var st api.Status
	for {
		var err error
		if st, err = status(srv.API()); err == nil && st.Lag == 0 && st.ProjectedSeq == st.StreamSeq {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("projection did not catch up: %+v (%v)", st, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	caughtUp := time.Since(start)
	srv.Stop()

	// Offline, with the server stopped: the stream read from the server's
	// own store directory, the projection opened from its directory and
	// compared with a rebuild (crashrig.Verify, run by a binary built
	// without -race so that it takes seconds, not minutes).
	acked := map[string]uint64{}
	for _, p := range pubs {
		for id, seq := range p.acked {
			acked[id] = seq
		}
	}
	rep := verify(t, ctx, verifier, data, acked)
	switch {
	case rep.Msgs != uint64(publishers*perPublisher) || rep.Acked != publishers*perPublisher:
		t.Errorf("%d envelopes sent, %d acknowledged, %d stored", publishers*perPublisher, rep.Acked, rep.Msgs)
	case rep.FirstSeq != 1 || rep.LastSeq != rep.Msgs:
		t.Errorf("stream holds seq %d..%d as %d messages: a hole in an append-only log", rep.FirstSeq, rep.LastSeq, rep.Msgs)
	}
	if rep.MissingN+rep.DoublesN+rep.MovedN+rep.UnackedN+rep.Undecodable > 0 {
		t.Errorf("acknowledged but missing %d %v; stored twice %d %v; stored at another seq than acknowledged %d %v; stored but never acknowledged %d %v; undecodable %d",
			rep.MissingN, rep.Missing, rep.DoublesN, rep.Doubles, rep.MovedN, rep.Moved, rep.UnackedN, rep.Unacked, rep.Undecodable)
	}
	if rep.Checkpoint != rep.LastSeq {
		t.Errorf("projection checkpoint %d, stream last seq %d", rep.Checkpoint, rep.LastSeq)
	}
	if rep.RebuildDiff != "" {
		t.Errorf("projection differs from a rebuild of the stream: %s", rep.RebuildDiff)
	}
	if want := tlog.StoredHashCount(int64(rep.Checkpoint)); rep.TreeHashes != want {
		t.Errorf("the Merkle tree holds %d stored hashes, the projection at seq %d needs %d: tree and projection at different sizes", rep.TreeHashes, rep.Checkpoint, want)
	}
	if rep.StatsEvents != int64(rep.Msgs) || rep.Duplicates != 0 {
		t.Errorf("stats count %d events (%d folded as duplicates); the stream holds %d", rep.StatsEvents, rep.Duplicates, rep.Msgs)
	}
	if rep.EventsMismatchN+rep.OrphanTargetExistsN+rep.UnknownKeys > 0 {
		t.Errorf("events ≠ history entries: %d %v; orphans whose target exists: %d %v; unknown keys %d",
			rep.EventsMismatchN, rep.EventsMismatch, rep.OrphanTargetExistsN, rep.OrphanTargetExists, rep.UnknownKeys)
	}

	var worst time.Duration
	for _, r := range recoveries {
		worst = max(worst, r)
	}
	retried, dups, again := retries(pubs)
	t.Logf("sync_interval %s: %d events from %d publishers acknowledged (%d appends retried by the Appender, %d answered as duplicates of a stored copy, %d appended again by the publisher), each stored once at its acknowledged seq; "+
		"%d SIGKILLs at stream seq ~%v, serving again after %v (worst %v); published in %v, projection caught up at %v; "+
		"%d proposals, %d history entries, %d orphan lists; projection equals a rebuild (rebuild %v, compare %v)",
		syncInterval, rep.Acked, publishers, retried, dups, again, kills, killedAt, recoveries, worst.Round(time.Millisecond),
		publishedIn.Round(time.Millisecond), caughtUp.Round(time.Millisecond),
		rep.Proposals, rep.HistoryEntries, rep.OrphanLists, rep.RebuildTook.Round(time.Millisecond), rep.CompareTook.Round(time.Millisecond))
}

// verify runs the verifier binary on a stopped ledger's data directory.
func verify(t *testing.T, ctx context.Context, verifier, data string, acked map[string]uint64) *crashrig.Report {
	t.Helper()
	dir := t.TempDir()
	ackedFile := filepath.Join(dir, "acked")
	if err := crashrig.WriteAcked(ackedFile, acked); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, verifier, "-data", data, "-tmp", dir, "-acked", ackedFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crashverify: %v\n%s", err, stderr.String())
	}
	var rep crashrig.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("crashverify output %q: %v", out, err)
	}
	return &rep
}

// retries sums the publishers' retry counters.
func retries(pubs []*publisher) (retried, dups, again int) {
	for _, p := range pubs {
		retried, dups, again = retried+p.retried, dups+p.dupAnswers, again+p.again
	}
	return
}
