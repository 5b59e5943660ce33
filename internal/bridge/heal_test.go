package bridge_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
	"github.com/mewledger/ledger/internal/testkit/natstest"
)

// runOnce runs a --history --once bridge over file to its end.
func runOnce(t *testing.T, o bridge.Options) bridge.Health {
	t.Helper()
	o.Once, o.Logger = true, natstest.Logger(t)
	b, err := bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("--once did not end by itself")
	}
	return b.Health()
}

// TestHistoryOnceHeals (issue 38): `--history FILE --once` over a copy
// of the gateway's log that holds only its first part stores what it
// delivers; over the whole log later it stores only what the ledger
// lacked (the rest answered duplicate) and exits; a third run stores
// nothing. Each run ends with its follower's gap; every envelope is
// stored once.
func TestHistoryOnceHeals(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(filepath.Join(capturesDir, "gateway-logs", "a-fulfil.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(full, []byte("\n"))
	dir := t.TempDir()
	part := filepath.Join(dir, "envelope-history.part.jsonl")
	whole := filepath.Join(dir, "envelope-history.jsonl")
	// The log up to the proposal, its last line without its newline (a copy cut short).
	half := bytes.Join(lines[:29], nil) // up to the proposal
	if err := os.WriteFile(part, bytes.TrimRight(half, "\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(whole, full, 0o600); err != nil {
		t.Fatal(err)
	}
	mew, space := mewSpace(t, "a-fulfil"), "heal"
	o := bridge.Options{MEWSpace: mew, Space: space, Participant: "history-copy", Sink: bridge.AppenderSink{Appender: a.Appender()}}

	o.HistoryFile = part
	first := runOnce(t, o)
	if first.Appended == 0 || first.Duplicates != 0 {
		t.Fatalf("first part: %+v", first)
	}
	o.HistoryFile = whole
	second := runOnce(t, o)
	if second.Duplicates != first.Appended || second.Appended == 0 {
		t.Fatalf("whole log after the first part (%d stored): %+v, want %d duplicates", first.Appended, second, first.Appended)
	}
	third := runOnce(t, o)
	if third.Appended != 0 || third.Duplicates != first.Appended+second.Appended {
		t.Fatalf("whole log again: %+v, want nothing stored", third)
	}
	st, _, err := cl.Stats(context.Background(), apitest.ReadOptions{Space: space, MinSeq: caughtUp(t, cl)})
	if err != nil {
		t.Fatal(err)
	}
	gaps := gapsOf(t, cl, space)
	if want := int64(first.Appended + second.Appended + len(gaps)); st.Events != want {
		t.Errorf("%d events stored, want %d (%d envelopes once each and %d gaps)", st.Events, want, first.Appended+second.Appended, len(gaps))
	}
	if len(gaps) != 3 {
		t.Fatalf("gaps %+v, want each run's end", gaps)
	}
	for _, g := range gaps {
		if !strings.Contains(g.Reason, "--once") || g.Bridge != "history-copy" || g.ReconnectedAt != nil {
			t.Errorf("gap %+v", g)
		}
	}
}
