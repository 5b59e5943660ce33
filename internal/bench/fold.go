package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/projector"
)

// foldLedger rebuilds the projection from the whole stream of e into a
// fresh store as `ledger rebuild` does (projector.Rebuild into a store
// with default options and no WAL, as repair.RebuildInto opens it;
// with a WAL if o.FoldWAL), flushed inside the clock, and returns events
// per second, the bytes it wrote (writeVolume) and the size of the
// store's files after a clean Close.
func foldLedger(ctx context.Context, o *Options, e *env, n int) (rate float64, written, disk uint64, err error) {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-fold-*")
	if err != nil {
		return 0, 0, 0, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	store, err := projections.OpenStore(projections.StoreOptions{Dir: dir, Logger: o.Logger, NoWAL: !o.FoldWAL})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("bench: %w", err)
	}
	defer store.Close()
	start := time.Now()
	last, err := projector.Rebuild(ctx, e.js, store, projector.RebuildOptions{})
	if err == nil {
		err = store.Flush() // inside the clock: without a WAL, what makes it durable
	}
	took := time.Since(start)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("bench: rebuild: %w", err)
	}
	if last != uint64(n) {
		return 0, 0, 0, fmt.Errorf("bench: rebuild stopped at seq %d, want %d", last, n)
	}
	m, err := store.Metrics()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("bench: %w", err)
	}
	if err := store.Close(); err != nil {
		return 0, 0, 0, fmt.Errorf("bench: %w", err)
	}
	if disk, err = dirBytes(dir); err != nil {
		return 0, 0, 0, err
	}
	return float64(n) / took.Seconds(), writeVolume(m), disk, nil
}

// dirBytes is the size of the files in dir (not its subdirectories).
func dirBytes(dir string) (uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	var n uint64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return 0, fmt.Errorf("bench: %w", err)
		}
		if fi.Mode().IsRegular() {
			n += uint64(fi.Size())
		}
	}
	return n, nil
}

// writeVolume is what a fold wrote before compactions: Pebble's WAL and
// the tables and blob files its flushes wrote.
func writeVolume(m *pebble.Metrics) uint64 {
	v := m.WAL.BytesIn
	for _, l := range m.Levels {
		v += l.TableBytesFlushed + l.BlobBytesFlushed
	}
	return v
}

// naiveEnvelope is what the naive baseline decodes of an envelope.
type naiveEnvelope struct {
	ID            string          `json:"id"`
	From          string          `json:"from"`
	Kind          string          `json:"kind"`
	CorrelationID []string        `json:"correlation_id"`
	Payload       json.RawMessage `json:"payload"`
}

// naiveState is the naive baseline's per-proposal record.
type naiveState struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Proposer string `json:"proposer,omitempty"`
	Events   int    `json:"events"`
	LastSeq  uint64 `json:"last_seq"`
}

var naiveStates = map[string]string{
	"mcp/proposal": "pending", "mcp/request": "fulfilled", "mcp/withdraw": "withdrawn", "mcp/reject": "rejected",
}

// naiveBatch is the naive baseline's commit interval.
const naiveBatch = 1000

// foldNaive is the fold baseline: a durable pull consumer that, per event,
// decodes the envelope with encoding/json, reads the proposal's JSON state
// record from Pebble (default options, through an indexed batch so that it
// sees its own uncommitted writes), updates it and writes it back,
// committing with Sync (and acknowledging) every 1000 events. It returns
// events per second and the bytes it wrote (writeVolume).
func foldNaive(ctx context.Context, o *Options, e *env, n int, name string) (float64, uint64, error) {
	dir, err := os.MkdirTemp(o.TempDir, "ledger-bench-naive-*")
	if err != nil {
		return 0, 0, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		return 0, 0, fmt.Errorf("bench: naive: %w", err)
	}
	defer db.Close()
	start := time.Now() // like Rebuild's, the clock includes making the consumer
	cons, err := e.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       name,
		AckPolicy:     jetstream.AckAllPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 4 * naiveBatch,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("bench: naive: consumer: %w", err)
	}
	defer func() { _ = e.stream.DeleteConsumer(context.WithoutCancel(ctx), name) }()
	it, err := cons.Messages(jetstream.PullMaxMessages(naiveBatch))
	if err != nil {
		return 0, 0, fmt.Errorf("bench: naive: messages: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	b := db.NewIndexedBatch()
	defer func() { _ = b.Close() }()
	var seqBuf [8]byte
	for i := 1; i <= n; i++ {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			return 0, 0, fmt.Errorf("bench: naive: next: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return 0, 0, fmt.Errorf("bench: naive: metadata: %w", err)
		}
		var env naiveEnvelope
		if err := json.Unmarshal(m.Data(), &env); err != nil {
			return 0, 0, fmt.Errorf("bench: naive: decode: %w", err)
		}
		id := env.ID
		if env.Kind != "mcp/proposal" && len(env.CorrelationID) > 0 {
			id = env.CorrelationID[0]
		}
		key := append([]byte("p/"), id...)
		var st naiveState
		switch v, closer, err := b.Get(key); {
		case errors.Is(err, pebble.ErrNotFound):
			st.ID = id
		case err != nil:
			return 0, 0, fmt.Errorf("bench: naive: get: %w", err)
		default:
			err := json.Unmarshal(v, &st)
			_ = closer.Close()
			if err != nil {
				return 0, 0, fmt.Errorf("bench: naive: state: %w", err)
			}
		}
		if s, ok := naiveStates[env.Kind]; ok && (st.State == "" || st.State == "pending") {
			st.State = s
		}
		if env.Kind == "mcp/proposal" {
			st.Proposer = env.From
		}
		st.Events++
		st.LastSeq = md.Sequence.Stream
		v, err := json.Marshal(&st)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: naive: encode: %w", err)
		}
		if err := b.Set(key, v, nil); err != nil {
			return 0, 0, fmt.Errorf("bench: naive: set: %w", err)
		}
		if i%naiveBatch == 0 || i == n {
			binary.BigEndian.PutUint64(seqBuf[:], md.Sequence.Stream)
			if err := b.Set([]byte("checkpoint"), seqBuf[:], nil); err != nil {
				return 0, 0, fmt.Errorf("bench: naive: set: %w", err)
			}
			if err := b.Commit(pebble.Sync); err != nil {
				return 0, 0, fmt.Errorf("bench: naive: commit: %w", err)
			}
			_ = b.Close()
			b = db.NewIndexedBatch()
			if err := m.Ack(); err != nil {
				return 0, 0, fmt.Errorf("bench: naive: ack: %w", err)
			}
		}
	}
	took := time.Since(start)
	return float64(n) / took.Seconds(), writeVolume(db.Metrics()), nil
}

// quietPebble discards Pebble's informational messages.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("bench: pebble fatal: "+format, args...))
}
