package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/server/app"
	"github.com/mewledger/ledger/ledger/appendlog"
)

// FigIngestR3 is the ingest figure on an in-process three-node cluster.
const FigIngestR3 = "ingest_r3"

// cluster is three in-process JetStream nodes on loopback, fsync always.
type cluster struct {
	dirs  []string
	nodes []*natsserver.Server
}

func (c *cluster) urls() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.ClientURL()
	}
	return out
}

func (c *cluster) close() {
	for _, n := range c.nodes {
		if n != nil {
			n.Shutdown()
		}
	}
	for _, d := range c.dirs {
		_ = os.RemoveAll(d)
	}
}

func startCluster(ctx context.Context, o *Options) (c *cluster, err error) {
	c = &cluster{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	const n = 3
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: free port: %w", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	for i := range n {
		dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-r3-*")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		c.dirs = append(c.dirs, dir)
		srv, err := natsserver.Start(ctx, natsserver.Options{
			StoreDir: dir, Port: natsserver.RandomPort, SyncAlways: true,
			ServerName: fmt.Sprintf("b%d", i+1), ClusterName: "ledger-bench", ClusterHost: "127.0.0.1",
			ClusterPort: ports[i], Routes: routes, Logger: o.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("bench: cluster node %d: %w", i+1, err)
		}
		c.nodes = append(c.nodes, srv)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		leader, current, online := false, true, 0
		for _, s := range c.nodes {
			ns := s.NatsServer()
			if ns.JetStreamIsLeader() {
				leader, online = true, len(ns.JetStreamClusterPeers())
			}
			current = current && ns.JetStreamIsCurrent()
		}
		if leader && current && online == n {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("bench: the cluster elected no JetStream meta leader in 60s")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// ingestR3Figure is the ingest figure with the LEDGER stream on three
// replicas of an in-process cluster: the ledger (its NATS client on the
// cluster, as `ledger serve --nats-url ... --replicas 3`) against raw
// atomic batches of the same size.
func (r *Report) ingestR3Figure(ctx context.Context, o *Options) error {
	evs, err := generate(0, o.IngestEvents, o.PadTo)
	if err != nil {
		return err
	}
	progress(o, "ingest_r3: %d events (~%d bytes each), three-node cluster, sync_interval always", len(evs), avgSize(evs))
	vals, base, err := paired(ctx, o, FigIngestR3, o.Reps,
		func(ctx context.Context) (float64, error) {
			c, err := startCluster(ctx, o)
			if err != nil {
				return 0, err
			}
			defer c.close()
			return ingestLedgerWith(ctx, o, evs, func(ao *app.Options) { ao.NATSURLs, ao.Replicas = c.urls(), 3 })
		},
		func(ctx context.Context) (float64, error) {
			c, err := startCluster(ctx, o)
			if err != nil {
				return 0, err
			}
			defer c.close()
			nc, err := nats.Connect(c.urls()[0])
			if err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			st, err := appendlog.EnsureStream(ctx, js, appendlog.StreamOptions{Replicas: 3})
			if err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			runtime.GC()
			start := time.Now()
			for lo := 0; lo < len(evs); lo += appendlog.DefaultMaxBatch {
				if err := rawBatch(ctx, nc, evs[lo:min(lo+appendlog.DefaultMaxBatch, len(evs))]); err != nil {
					return 0, err
				}
			}
			took := time.Since(start)
			info, err := st.Info(ctx)
			if err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
			if info.State.Msgs != uint64(len(evs)) {
				return 0, fmt.Errorf("bench: the R3 stream holds %d messages, want %d", info.State.Msgs, len(evs))
			}
			return float64(len(evs)) / took.Seconds(), nil
		})
	if err != nil {
		return err
	}
	row := Row{
		Figure: fmt.Sprintf("ingest_r3: events/s, as ingest on a three-node in-process cluster, LEDGER on 3 replicas (sync_interval always; %d events, ~%d B)",
			len(evs), avgSize(evs)),
		Unit:     unitRate,
		Values:   vals,
		Baseline: base,
		BaseName: fmt.Sprintf("raw atomic batches of %d, R3", appendlog.DefaultMaxBatch),
		Target:   "—",
	}
	row.ratios()
	r.Rows = append(r.Rows, row)
	return nil
}
