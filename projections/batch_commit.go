package projections

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mewledger/ledger/api"
)

// Discard is Close, for deferred calls.
func (b *Batch) Discard() { _ = b.Close() }

// Close ends the batch without writing anything: its overlay is dropped,
// and a handed-off batch closed instead of committed fails, with
// ErrParentFailed, the commits of the batches that read from it. It always
// returns nil, and is safe to call more than once and after Commit.
func (b *Batch) Close() error {
	b.endPending(ErrBatchDone) // handed off and closed without a commit
	b.finish()
	return nil
}

func (b *Batch) finish() {
	b.done = true
	b.props, b.refs, b.orphans, b.stats, b.history, b.spaces = nil, nil, nil, nil, nil, nil
	b.aux, b.parents = nil, nil
	b.changes = nil
	b.events = nil
	b.coverTouched, b.runMarks = nil, nil
	b.tree = nil
	b.dirty = 0
}

// kv is one write of a commit; a nil val with del set is a deletion.
type kv struct {
	key, val []byte
	del      bool
}

// Commit writes the overlay and the checkpoint seq in one Pebble batch with
// pebble.Sync: the dirty records, the index entries that changed (the old
// version's that are gone deleted, the new version's written), space
// markers, and the checkpoint. Keys are written in sorted order, so the
// result does not depend on the order of the overlay's writes. Then
// AppliedSeq() is seq and waiters are woken. The batch is ended whatever
// the outcome.
//
// seq must be greater than AppliedSeq() (ErrStaleCommit otherwise), except
// that an empty batch at seq == AppliedSeq() is a no-op.
func (b *Batch) Commit(seq uint64) (err error) {
	if b.done {
		return ErrBatchDone
	}
	defer b.finish()
	defer func() { b.endPending(err) }() // before finish: readers leave first
	if !b.frozen {
		if err := b.endArrival(cmp.Or(b.coverSeq, seq)); err != nil {
			return fmt.Errorf("projections: commit seq %d: %w", seq, err)
		}
	}
	b.tieToPending() // one pending now, made after b: b follows it
	if err := b.waitParents(); err != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, err)
	}
	s := b.s
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()

	if s.commits.failed != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, s.commits.failed)
	}
	applied := s.cp.seq.Load()
	if seq <= applied {
		if seq == applied && b.dirty == 0 {
			return nil
		}
		return fmt.Errorf("%w: commit seq %d, applied %d", ErrStaleCommit, seq, applied)
	}
	defer s.commits.buf.release()
	ops, err := b.collect(&s.commits.buf)
	if err != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, err)
	}
	ops = append(ops, kv{key: checkpointKey, val: appendU64(nil, seq)})
	// Sorted, the writes go into the memtable in order (its inserts reuse
	// the previous position), and a key written twice shows up.
	// An index is sorted, not the writes: swapping pointer-free 16-byte
	// entries is cheaper than swapping kv structs (and their pointers'
	// write barriers), and their abbreviated keys spare most key
	// comparisons (sortWrites).
	order := sortWrites(s.commits.buf.order, ops)
	s.commits.buf.order = order

	if s.guard != nil {
		if err := s.guard(); err != nil {
			return fmt.Errorf("projections: commit seq %d: %w", seq, err)
		}
	}
	pb := s.commits.buf.batch(s.db)
	for i, sk := range order {
		o := ops[sk.idx]
		if i > 0 && bytes.Equal(ops[order[i-1].idx].key, o.key) {
			return fmt.Errorf("projections: commit seq %d: key %q written twice", seq, o.key)
		}
		if o.del {
			err = pb.Delete(o.key, nil)
		} else {
			err = pb.Set(o.key, o.val, nil)
		}
		if err != nil {
			return fmt.Errorf("projections: commit seq %d: %w", seq, err)
		}
	}
	if err := s.commitPebble(pb); err != nil {
		return fmt.Errorf("projections: commit seq %d: %w", seq, err)
	}
	s.recent.remember(b)
	for sp := range b.spaces {
		s.commits.spaces[sp] = struct{}{}
	}
	s.cp.publish(seq)
	return nil
}

// commitPebble commits pb with pebble.Sync (NoSync for a store without a
// WAL, which Pebble requires; see StoreOptions.NoWAL). Pebble reports a WAL write or
// sync error of a commit through Logger.Fatalf, which pebbleLogger turns
// into a pebbleFatal panic: that one is recovered here and becomes
// ErrStoreFailed (sticky), so that a full disk stops the projector with an
// error instead of killing the process. The caller holds the commit lock (commitState.mu).
func (s *Store) commitPebble(pb *pebble.Batch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(pebbleFatal)
			if !ok {
				panic(v)
			}
			s.commits.failed = fmt.Errorf("%w: %s", ErrStoreFailed, f.msg)
			s.log.Error().Str("component", "pebble").Msg(f.msg)
			err = s.commits.failed
		}
	}()
	return pb.Commit(s.sync())
}

// commitState is what the store's commits share. mu serialises them (a
// Commit holds it from its checks to the checkpoint's publication) and
// guards the other fields: buf, the commits' reused scratch; spaces, the
// spaces whose marker key is written; failed, set when a commit hit a
// Pebble fatal error (every later commit returns it).
type commitState struct {
	mu     sync.Mutex // serialises commits; guards buf, spaces and failed
	buf    commitBuf
	spaces map[string]struct{}
	failed error
}

// commitBuf is the scratch memory of Commit, reused from commit to commit
// (a rebuild commits hundreds of batches of thousands of writes): the
// writes, their keys and values, and the Pebble batch. It belongs to the
// store and is used under the commit lock (commitState.mu).
type commitBuf struct {
	a        arena
	ops      []kv
	old, cur []kv // one proposal's index entries
	// evOld, evCur: one event record's index keys (store_events.go)
	evOld, evCur [][]byte
	// postings: the posting list changes of a commit (store_postings.go)
	postings []postingChange
	order    []sortKey
	pb       *pebble.Batch
}

// batch returns the reusable Pebble batch, empty.
func (c *commitBuf) batch(db *pebble.DB) *pebble.Batch {
	if c.pb == nil {
		c.pb = db.NewBatch(pebble.WithMaxRetainedSizeBytes(maxRetainedBatch))
	} else {
		c.pb.Reset()
	}
	return c.pb
}

// release ends a commit's use of c: what it handed out is no longer
// referenced, and an unusually large buffer is let go.
func (c *commitBuf) release() {
	clear(c.ops) // no pointers into old arenas kept alive
	c.ops = c.ops[:0]
	if cap(c.a.b) > maxRetainedBatch {
		c.a.b = nil
	}
	if cap(c.ops) > maxRetainedBatch/64 {
		c.ops = nil
	}
	if c.pb != nil {
		c.pb.Reset() // drops its buffer when above maxRetainedBatch
	}
}

// close releases the Pebble batch; the caller holds the store exclusively.
func (c *commitBuf) close() {
	if c.pb != nil {
		_ = c.pb.Close()
		c.pb = nil
	}
}

// maxRetainedBatch bounds the Pebble batch buffer a store keeps between
// commits (a batch of 1000 bench events is about 1.3 MiB).
const maxRetainedBatch = 8 << 20

// collect turns the overlay into writes, encoded into c (valid until its
// next use). It reads from Pebble the original version of proposals that
// were written without being read first.
func (b *Batch) collect(c *commitBuf) ([]kv, error) {
	c.a.reset()
	ops := c.ops[:0]
	put := func(start int, del bool) { // the key is c.a.b[start:], or key then value
		ops = append(ops, kv{key: c.a.take(start), del: del})
	}
	putKV := func(keyStart, valStart int) {
		ops = append(ops, kv{key: c.a.b[keyStart:valStart:valStart], val: c.a.take(valStart)})
	}
	var err error
	for k, sl := range b.props {
		if !sl.dirty {
			continue
		}
		orig := sl.orig
		if !sl.origKnown {
			// Read here, not kept in the slot: a later batch may be
			// reading this (handed-off) batch's slots.
			var v api.Proposal
			found, err := getJSON(b.s.db, proposalKey(k.space, k.id), &v)
			if err != nil {
				return nil, fmt.Errorf("read proposal %q in space %q: %w", k.id, k.space, err)
			}
			if found {
				orig = &v
			}
		}
		if sl.cur.Space != k.space || sl.cur.ID != k.id {
			return nil, fmt.Errorf("proposal %q in space %q was put as %q in %q", k.id, k.space, sl.cur.ID, sl.cur.Space)
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, tagProposal, k.space, k.id)
		vs := len(c.a.b)
		// the bytes GET serves (encode.go)
		if c.a.b, err = appendServedProposal(c.a.b, sl.cur); err != nil {
			return nil, fmt.Errorf("encode proposal %q in space %q: %w", k.id, k.space, err)
		}
		putKV(ks, vs)
		// Both lists are in key order: one merge finds the entries the
		// new version drops and those it adds or changes.
		c.old = c.a.indexEntries(c.old[:0], orig)
		c.cur = c.a.indexEntries(c.cur[:0], sl.cur)
		i, j := 0, 0
		for i < len(c.old) || j < len(c.cur) {
			switch {
			case j == len(c.cur) || (i < len(c.old) && bytes.Compare(c.old[i].key, c.cur[j].key) < 0):
				ops = append(ops, kv{key: c.old[i].key, del: true})
				i++
			case i == len(c.old) || bytes.Compare(c.old[i].key, c.cur[j].key) > 0:
				ops = append(ops, c.cur[j])
				j++
			default:
				if !bytes.Equal(c.old[i].val, c.cur[j].val) {
					ops = append(ops, c.cur[j])
				}
				i++
				j++
			}
		}
	}
	for k, sl := range b.refs {
		if !sl.dirty {
			continue
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, tagEventRef, k.space, k.id)
		vs := len(c.a.b)
		c.a.b = appendEventRefBin(c.a.b, sl.cur)
		putKV(ks, vs)
	}
	for k, sl := range b.orphans {
		if !sl.dirty {
			continue
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, tagOrphans, k.space, k.id)
		if sl.cur == nil {
			put(ks, true)
			continue
		}
		val, err := json.Marshal(sl.cur)
		if err != nil {
			return nil, fmt.Errorf("encode orphans of %q in space %q: %w", k.id, k.space, err)
		}
		vs := len(c.a.b)
		c.a.b = append(c.a.b, val...)
		putKV(ks, vs)
	}
	for k, sl := range b.aux {
		if !sl.dirty {
			continue
		}
		ks := len(c.a.b)
		c.a.b = appendSpaceID(c.a.b, k.tag, k.space, k.id)
		if sl.cur == nil {
			put(ks, true)
			continue
		}
		val, err := sl.value()
		if err != nil {
			return nil, fmt.Errorf("encode %c record in space %q: %w", k.tag, k.space, err)
		}
		vs := len(c.a.b)
		c.a.b = append(c.a.b, val...)
		putKV(ks, vs)
	}
	for sp, sl := range b.stats {
		if !sl.dirty {
			continue
		}
		val, err := json.Marshal(sl.cur)
		if err != nil {
			return nil, fmt.Errorf("encode stats of space %q: %w", sp, err)
		}
		ops = append(ops, kv{key: statsKey(sp), val: val})
	}
	for k, h := range b.history {
		ks := len(c.a.b)
		c.a.b = appendU64(appendSpaceID(c.a.b, tagHistory, k.space, k.key), k.seq)
		if h == nil {
			put(ks, true)
			continue
		}
		vs := len(c.a.b)
		c.a.b = appendHistoryBin(c.a.b, h)
		putKV(ks, vs)
	}
	for sp := range b.spaces {
		if _, ok := b.s.commits.spaces[sp]; ok {
			continue
		}
		ops = append(ops, kv{key: spaceKey(sp), val: []byte{}})
	}
	if ops, err = b.collectChanges(c, ops); err != nil {
		return nil, err
	}
	if ops, err = b.collectEvents(c, ops); err != nil {
		return nil, err
	}
	ops = b.collectTree(c, ops)
	c.ops = ops
	return ops, nil
}
