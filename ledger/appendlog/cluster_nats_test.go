package appendlog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/ledger/appendlog"
	"github.com/mewledger/ledger/subjects"
)

// Smoke test of an in-process 3-node cluster: an R3 LEDGER stream,
// appends through one node, reads through another, every replica current.
func TestClusterR3Smoke(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	start := time.Now()
	nodes := natstest.StartCluster(t, 3)
	t.Logf("3-node cluster with meta leader in %v", time.Since(start))
	ctx := ctxT(t)

	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.ClientURL()
	}
	_, js := natstest.ConnectURL(t, urls[0])
	st, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{Replicas: 3})
	if err != nil {
		t.Fatalf("EnsureStream R3: %v", err)
	}
	if r := st.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("replicas = %d", r)
	}
	// Checking again on the cluster changes nothing.
	if _, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{Replicas: 3}); err != nil {
		t.Fatalf("EnsureStream R3 again: %v", err)
	}

	a := newAppender(t, js, appendlog.AppenderOptions{})
	const n = 300
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = tProposal(idf("c", i), "alice").raw()
	}
	t0 := time.Now()
	for i, r := range a.AppendMany(ctx, "", raws) {
		if r.Err != nil || r.Seq != uint64(i+1) {
			t.Fatalf("input %d: %+v", i, r)
		}
	}
	t.Logf("AppendMany R3: %d envelopes in %v", n, time.Since(t0))
	if r := mustAppend(t, a, "", raws[7]); !r.Duplicate || r.Seq != 8 {
		t.Fatalf("duplicate on the cluster: %+v", r)
	}

	// Read back through another node.
	_, js3 := natstest.ConnectURL(t, urls[2])
	st3, err := js3.Stream(ctx, subjects.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 150, n} {
		m, err := st3.GetMsg(ctx, seq)
		if err != nil || string(m.Data) != string(raws[seq-1]) {
			t.Fatalf("GetMsg(%d) through node 3: %v", seq, err)
		}
	}
	for {
		info, err := st3.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ok := info.State.Msgs == n && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2
		for _, p := range info.Cluster.Replicas {
			ok = ok && p.Current && !p.Offline
		}
		if ok {
			names := []string{info.Cluster.Leader}
			for _, p := range info.Cluster.Replicas {
				names = append(names, p.Name)
			}
			t.Logf("LEDGER R3 on %s (leader first), %d messages", strings.Join(names, ", "), info.State.Msgs)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("replicas not current: state %+v cluster %+v: %v", info.State, info.Cluster, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
