// Package natstest starts real embedded NATS servers (and clusters) for
// tests. Everything it starts is stopped by t.Cleanup; nothing is mocked.
package natstest

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/internal/lib/natsserver"
	"github.com/mewledger/ledger/internal/testkit/testctx"
)

// ClusterName is the cluster name of StartCluster's nodes.
const ClusterName = "ledger-test"

// Logger returns a zerolog logger writing to t.Log that goes quiet when
// the test's cleanups have run, so that a late line from a server goroutine
// cannot fail the test binary.
func Logger(t testing.TB) zerolog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close) // registered first: runs after every later cleanup
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}).
		With().Timestamp().Logger().Level(zerolog.WarnLevel)
}

type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

var _ io.Writer = (*testWriter)(nil)

// Options returns the options Start uses: a fresh t.TempDir() store, a
// random loopback port, fsync on every write (the product default) and the
// test logger. Change them and call StartWith for anything else.
func Options(t testing.TB) natsserver.Options {
	return natsserver.Options{
		StoreDir: t.TempDir(),
		Port:     natsserver.RandomPort,
		Logger:   Logger(t),
	}
}

// Start starts a single JetStream server with Options(t) and shuts it down
// in t.Cleanup.
func Start(t testing.TB) *natsserver.Server {
	t.Helper()
	return StartWith(t, Options(t))
}

// StartWith starts a server with o and shuts it down in t.Cleanup.
func StartWith(t testing.TB, o natsserver.Options) *natsserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := natsserver.Start(ctx, o)
	if err != nil {
		t.Fatalf("natstest: start server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// Connect connects to s and returns the connection and a JetStream handle.
// t.Cleanup drains the connection and waits (bounded) until it is closed.
// Extra options are appended to the defaults.
func Connect(t testing.TB, s *natsserver.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return ConnectURL(t, s.ClientURL(), opts...)
}

// ConnectURL is Connect for a URL (or a comma-separated list of URLs).
func ConnectURL(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	closed := make(chan struct{})
	log := Logger(t)
	all := append([]nats.Option{
		nats.Name(t.Name()),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		// Async errors (e.g. permission violations) go to the test log
		// instead of nats.go's default stderr print.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn().Err(err).Msg("nats client async error")
		}),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(func() {
		if err := nc.Drain(); err != nil {
			nc.Close()
		}
		select {
		case <-closed:
		case <-time.After(time.Until(testctx.Deadline(t))):
			t.Errorf("natstest: connection not closed after drain")
			nc.Close()
		}
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// ClusterOptions returns the options of an n-node cluster on loopback:
// node i (0-based) is named "n<i+1>", has its own store, a random client
// port, a fixed cluster port (free when this was called) and routes to
// every node, so that any node can be restarted on the same options.
func ClusterOptions(t testing.TB, n int) []natsserver.Options {
	t.Helper()
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range n {
		ports[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	log := Logger(t)
	opts := make([]natsserver.Options, n)
	for i := range n {
		opts[i] = natsserver.Options{
			StoreDir:    t.TempDir(),
			Port:        natsserver.RandomPort,
			ServerName:  fmt.Sprintf("n%d", i+1),
			ClusterName: ClusterName,
			ClusterHost: "127.0.0.1",
			ClusterPort: ports[i],
			Routes:      routes,
			Logger:      log.With().Str("node", fmt.Sprintf("n%d", i+1)).Logger(),
		}
	}
	return opts
}

// StartCluster starts an n-node JetStream cluster on loopback (options of
// ClusterOptions), waits until the JetStream meta leader is elected and
// every node is current, and shuts the nodes down in t.Cleanup.
func StartCluster(t testing.TB, n int) []*natsserver.Server {
	t.Helper()
	opts := ClusterOptions(t, n)
	nodes := make([]*natsserver.Server, n)
	for i, o := range opts {
		nodes[i] = StartWith(t, o)
	}
	WaitMetaLeader(t, nodes, 30*time.Second)
	return nodes
}

// WaitMetaLeader waits until one of the running nodes is the JetStream meta
// leader, all of them are current, and the leader counts every one of them
// as an online peer (as stream placement does), or fails the test after
// timeout. Nodes that are nil are skipped. Without the last condition an
// R3 stream created right away could be refused with "no suitable peers
// for placement, peer offline" (it happened in CI).
func WaitMetaLeader(t testing.TB, nodes []*natsserver.Server, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		leader, current, running, online := false, true, 0, 0
		for _, s := range nodes {
			if s == nil {
				continue
			}
			running++
			ns := s.NatsServer()
			if ns.JetStreamIsLeader() {
				leader = true
				online = len(ns.JetStreamClusterPeers())
			}
			if !ns.JetStreamIsCurrent() {
				current = false
			}
		}
		if leader && current && online == running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: no JetStream meta leader with all %d nodes current and online after %v (leader %v, current %v, online %d)", running, timeout, leader, current, online)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
