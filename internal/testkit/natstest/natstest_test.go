package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/natstest"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// A 3-node cluster elects a meta leader, takes an R3 stream, and a node
// stopped and started again on its Options rejoins with its data.
func TestStartClusterRestartNode(t *testing.T) {
	nodes := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, js := natstest.Connect(t, nodes[0])
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := js.Publish(ctx, "s.x", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}

	o := nodes[2].Options()
	nodes[2].Shutdown()
	if _, err := js.Publish(ctx, "s.x", []byte("while n3 is down")); err != nil {
		t.Fatalf("publish with 2 of 3 nodes: %v", err)
	}
	restarted := natstest.StartWith(t, o)
	natstest.WaitMetaLeader(t, []*natsserver.Server{nodes[0], nodes[1], restarted}, 30*time.Second)

	_, js3 := natstest.Connect(t, restarted)
	deadline := testctx.Deadline(t)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		current := info.Cluster != nil && len(info.Cluster.Replicas) == 2
		for _, p := range info.Cluster.Replicas {
			current = current && p.Current
		}
		if info.State.Msgs == 11 && current {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node not current: %+v %+v", info.State, info.Cluster)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st3, err := js3.Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st3.GetMsg(ctx, 11); err != nil || string(m.Data) != "while n3 is down" {
		t.Fatalf("read through the restarted node: %v", err)
	}
}
