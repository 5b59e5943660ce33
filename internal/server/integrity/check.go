package integrity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// Tree is what the check reads of the projection's Merkle tree;
// *projections.Store implements it.
type Tree interface {
	TreeSize() int64
	ReadHashes(indexes []int64) ([]tlog.Hash, error)
}

// DefaultBatch is how many messages CheckRange reads at a time.
const DefaultBatch = 256

// CheckOptions tunes CheckRange.
type CheckOptions struct {
	// Batch is how many messages are read at a time (DefaultBatch).
	Batch int
	// Pace, if set, is called after each batch with the number of
	// messages it checked; it may sleep to bound the rate, and its error
	// ends the check.
	Pace func(ctx context.Context, n int) error
	// Progress, if set, is called after each batch with the next
	// sequence to check.
	Progress func(next uint64)
}

// CheckRange re-reads the stream's messages from..to (to ≤ the tree's
// size), recomputes each one's leaf hash (projections.LeafOf, as the fold
// does) and compares it with the tree's. It returns how many messages it
// checked and the first damage found (nil when none): a sequence the
// stream does not answer (missing, confirmed by a direct read) or a
// message that hashes to another leaf (altered). err is for a check that
// could not be made (NATS unreachable, ctx done): nothing is concluded.
func CheckRange(ctx context.Context, js jetstream.JetStream, tree Tree, from, to uint64, o CheckOptions) (checked uint64, damage *api.LogDamage, err error) {
	if from == 0 {
		from = 1
	}
	if n := uint64(max(tree.TreeSize(), 0)); to > n {
		return 0, nil, fmt.Errorf("integrity: check to seq %d: %w (the tree has %d)", to, projections.ErrBeyondTree, n)
	}
	if from > to {
		return 0, nil, nil
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return 0, nil, fmt.Errorf("integrity: stream %s: %w", subjects.StreamName, err)
	}
	imported := ledger.ImportedThrough(stream.CachedInfo().Config.Metadata)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return 0, nil, fmt.Errorf("integrity: read from seq %d: %w", from, err)
	}
	defer func() {
		// Not left to the server's inactivity threshold: a scrub makes
		// many.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	var (
		leaf  []byte
		idx   []int64
		found []tlog.Hash
		seqs  []uint64
	)
	next := from
	for next <= to {
		if err := ctx.Err(); err != nil {
			return checked, nil, err
		}
		want := min(uint64(o.Batch), to-next+1)
		b, err := cons.FetchNoWait(int(want))
		if err != nil {
			return checked, nil, fmt.Errorf("integrity: read from seq %d: %w", next, err)
		}
		idx, found, seqs = idx[:0], found[:0], seqs[:0]
		for m := range b.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return checked, nil, fmt.Errorf("integrity: read after seq %d: %w", next, err)
			}
			seq := md.Sequence.Stream
			if seq > to || seq < next {
				continue
			}
			ev := projections.StoredEvent(seq, md.Timestamp, m.Subject(), m.Headers().Get, m.Data(), imported)
			if leaf, err = projections.LeafOf(&ev).AppendBinary(leaf[:0]); err != nil {
				return checked, nil, fmt.Errorf("integrity: seq %d: %w", seq, err)
			}
			idx = append(idx, tlog.StoredHashIndex(0, int64(seq)-1))
			found = append(found, evidence.LeafHash(leaf))
			seqs = append(seqs, seq)
		}
		if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			return checked, nil, fmt.Errorf("integrity: read from seq %d: %w", next, err)
		}
		stored, err := tree.ReadHashes(idx)
		if err != nil {
			return checked, nil, fmt.Errorf("integrity: tree: %w", err)
		}
		for i, seq := range seqs {
			if seq > next {
				// The stream skipped sequences: each is confirmed by a
				// direct read before it is called missing.
				if d, err := confirmMissing(ctx, stream, tree, next); err != nil || d != nil {
					return checked, d, err
				}
				// It answers directly but was not delivered: check it
				// the slow way.
				if d, err := checkOne(ctx, stream, tree, next, imported); err != nil || d != nil {
					return checked, d, err
				}
				checked++
				next++
				if seq > next {
					// More than one skipped: restart from the next one.
					break
				}
			}
			if found[i] != stored[i] {
				d := NewDamage(api.DamageAltered, seq, stored[i].String(), found[i].String())
				return checked, &d, nil
			}
			checked++
			next = seq + 1
		}
		if len(seqs) == 0 && next <= to {
			// Nothing came: the awaited sequence is missing, or the
			// server is slow (then it answers directly).
			if d, err := confirmMissing(ctx, stream, tree, next); err != nil || d != nil {
				return checked, d, err
			}
			if d, err := checkOne(ctx, stream, tree, next, imported); err != nil || d != nil {
				return checked, d, err
			}
			checked++
			next++
		}
		if len(seqs) > 0 && seqs[len(seqs)-1]+1 != next && next <= to {
			// Restart the consumer where the check stands.
			return moreFrom(ctx, js, tree, next, to, o, checked)
		}
		if o.Progress != nil {
			o.Progress(next)
		}
		if o.Pace != nil && len(seqs) > 0 {
			if err := o.Pace(ctx, len(seqs)); err != nil {
				return checked, nil, err
			}
		}
	}
	return checked, nil, nil
}

func moreFrom(ctx context.Context, js jetstream.JetStream, tree Tree, next, to uint64, o CheckOptions, checked uint64) (uint64, *api.LogDamage, error) {
	n, d, err := CheckRange(ctx, js, tree, next, to, o)
	return checked + n, d, err
}

// confirmMissing reads seq directly: a record the stream does not hold is
// missing damage; nil when it answers.
func confirmMissing(ctx context.Context, stream jetstream.Stream, tree Tree, seq uint64) (*api.LogDamage, error) {
	_, err := stream.GetMsg(ctx, seq)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("integrity: read seq %d: %w", seq, err)
	}
	exp := ""
	if hs, err := tree.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq)-1)}); err == nil {
		exp = hs[0].String()
	}
	d := NewDamage(api.DamageMissing, seq, exp, "")
	return &d, nil
}

// checkOne checks seq by a direct read (StoredLeafHash).
func checkOne(ctx context.Context, stream jetstream.Stream, tree Tree, seq, imported uint64) (*api.LogDamage, error) {
	got, err := storedLeafHash(ctx, stream, seq, imported)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return confirmMissing(ctx, stream, tree, seq)
	}
	if err != nil {
		return nil, err
	}
	hs, err := tree.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(seq)-1)})
	if err != nil {
		return nil, fmt.Errorf("integrity: tree: %w", err)
	}
	if got != hs[0] {
		d := NewDamage(api.DamageAltered, seq, hs[0].String(), got.String())
		return &d, nil
	}
	return nil, nil
}

// storedLeafHash reads seq directly and returns its leaf hash.
func storedLeafHash(ctx context.Context, stream jetstream.Stream, seq, imported uint64) (tlog.Hash, error) {
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return tlog.Hash{}, err
	}
	ev := projections.StoredEvent(seq, raw.Time, raw.Subject, raw.Header.Get, raw.Data, imported)
	b, err := projections.LeafOf(&ev).AppendBinary(nil)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("integrity: seq %d: %w", seq, err)
	}
	return evidence.LeafHash(b), nil
}

// CheckSeq checks one sequence by a direct read: the damage found, nil
// when it is as the tree holds it.
func CheckSeq(ctx context.Context, js jetstream.JetStream, tree Tree, seq uint64) (*api.LogDamage, error) {
	if seq == 0 || int64(seq) > tree.TreeSize() {
		return nil, fmt.Errorf("integrity: check seq %d: %w (the tree has %d)", seq, projections.ErrBeyondTree, tree.TreeSize())
	}
	stream, err := js.Stream(ctx, subjects.StreamName)
	if err != nil {
		return nil, fmt.Errorf("integrity: stream %s: %w", subjects.StreamName, err)
	}
	return checkOne(ctx, stream, tree, seq, ledger.ImportedThrough(stream.CachedInfo().Config.Metadata))
}
