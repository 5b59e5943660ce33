package bridge_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mewledger/ledger/client"
	"github.com/mewledger/ledger/internal/bridge"
	"github.com/mewledger/ledger/internal/testkit/apitest"
	"github.com/mewledger/ledger/internal/testkit/apptest"
)

// TestHistoryStopGivesGap (issue 38): a --history follower that is
// stopped records its gap ("bridge stopped"), starting at the last
// envelope the ledger answered it, as a live bridge does; otherwise the
// ledger would take it for recording still, and a window in which every
// recorder was down would be no hole.
func TestHistoryStopGivesGap(t *testing.T) {
	a := apptest.Start(t)
	cl, err := apitest.New(client.Options{API: a.HTTPURL()})
	if err != nil {
		t.Fatal(err)
	}
	logLines := readLines(t, filepath.Join(capturesDir, "gateway-logs", "c-reject.jsonl"))
	mew, space := mewSpace(t, "c-reject"), "history-stop"
	path := filepath.Join(t.TempDir(), "envelope-history.jsonl")
	if err := os.WriteFile(path, append(bytes.Join(logLines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	b, stop := startBridgeStop(t, bridge.Options{HistoryFile: path, MEWSpace: mew, Space: space, Sink: bridge.AppenderSink{Appender: a.Appender()}, PollInterval: time.Millisecond})
	waitFor(t, "the log read", func() (bool, string) {
		h := b.Health()
		return h.Appended == 3, h.State
	})
	last := b.Health()
	stop()
	gaps := gapsOf(t, cl, space)
	if len(gaps) != 1 {
		t.Fatalf("gaps %+v, want the stop's", gaps)
	}
	g := gaps[0]
	if g.Reason != "bridge stopped" || g.Bridge != bridgeName || g.Gateway != path || g.LastSeq != last.LastSeq || g.LastEnvelope != last.LastStored || g.EndSeq != 0 {
		t.Errorf("gap %+v; the follower had stored up to %s at %d", g, last.LastStored, last.LastSeq)
	}
}
