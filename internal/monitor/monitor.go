package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sync/errgroup"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/lib/datalock"
)

// Monitor follows one ledger into one state directory. Check and Run are
// not for concurrent use; Close is safe twice.
type Monitor struct {
	o        Options
	verifier note.Verifier
	lock     *datalock.Lock
	s        *state

	mu      sync.Mutex // guards stats and closed
	stats   Stats
	closed  bool
	closing sync.Once
}

// Stats are the monitor's counters (and its metrics).
type Stats struct {
	// Size and Root are the accepted checkpoint's (-1 and "" for none).
	Size int64
	Root string
	// Cosigners of the accepted checkpoint (names of the required
	// witnesses whose cosignatures verified).
	Cosigners []string
	// EntriesVerified counts the entries verified since the monitor
	// started.
	EntriesVerified int64
	// Checks counts the checks made, Errors those that failed without a
	// finding (the ledger unreachable, a transport error).
	Checks, Errors int64
	// Findings counts findings by kind (KindName).
	Findings map[string]int64
	// LastFinding is the last finding's error text, LastFindingAt its
	// time (zero: none).
	LastFinding   string
	LastFindingAt time.Time
	// LastCheckAt is when the last check ended.
	LastCheckAt time.Time
}

// Result is what one check did.
type Result struct {
	// Size and Root are the accepted checkpoint's after the check.
	Size int64
	Root tlog.Hash
	// Previous is the accepted size before it.
	Previous int64
	// Entries is how many entries the check verified and copied.
	Entries int64
	// Cosigners of the accepted checkpoint.
	Cosigners []string
	// NoCheckpoint: the ledger had no (witnessed) checkpoint to serve.
	NoCheckpoint bool
}

// Open checks the options, locks the state directory and re-verifies the
// copy it holds (errors.Is ErrState when it does not verify).
func Open(ctx context.Context, o Options) (*Monitor, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, err := evidence.NewVerifier(o.VerifierKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	m := &Monitor{o: o, verifier: v, stats: Stats{Size: -1, Findings: map[string]int64{}}}
	if err := osMkdir(o.StateDir); err != nil {
		return nil, err
	}
	if m.lock, err = datalock.Acquire(o.StateDir); err != nil {
		return nil, fmt.Errorf("monitor: state directory %s: %w", o.StateDir, err)
	}
	if m.s, err = openState(o.StateDir, m); err != nil {
		_ = m.lock.Release()
		return nil, err
	}
	if a := m.s.accepted; a != nil {
		m.stats.Size, m.stats.Root = a.Size, a.Hash.String()
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(m.Collector()); err != nil {
			m.Close()
			return nil, fmt.Errorf("monitor: metrics: %w", err)
		}
	}
	return m, nil
}

// Close releases the state directory. Safe twice.
func (m *Monitor) Close() error {
	var err error
	m.closing.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		if m.o.Registerer != nil {
			m.o.Registerer.Unregister(m.Collector())
		}
		err = m.s.close()
		if rerr := m.lock.Release(); err == nil {
			err = rerr
		}
	})
	return err
}

// Stats returns a copy of the counters.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Findings = make(map[string]int64, len(m.stats.Findings))
	for k, v := range m.stats.Findings {
		s.Findings[k] = v
	}
	s.Cosigners = append([]string(nil), m.stats.Cosigners...)
	return s
}

// Accepted returns the accepted checkpoint's signed note (nil: none).
func (m *Monitor) Accepted() []byte { return m.s.acceptedNote }

// Run checks every Interval until ctx ends, logging what each check did;
// a finding is logged (error level) and counted, and the monitor goes on
// from the history it verified. It returns nil when ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_, _ = m.Check(ctx)
		t.Reset(m.o.Interval)
	}
}

// Check makes one check: the ledger's checkpoint against the accepted
// one, and the new entries. It returns a *Finding (errors.Is ErrFinding)
// when the ledger served something the monitor refuses, another error
// when it could not check (the ledger unreachable), the state unchanged
// in both cases.
func (m *Monitor) Check(ctx context.Context) (Result, error) {
	res, err := m.check(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Checks++
	m.stats.LastCheckAt = time.Now()
	if a := m.s.accepted; a != nil {
		m.stats.Size, m.stats.Root = a.Size, a.Hash.String()
	}
	log := m.o.Logger
	var f *Finding
	switch {
	case errors.As(err, &f):
		if f.Accepted == 0 {
			f.Accepted = m.s.acceptedSize()
		}
		kind := KindName(f.Kind)
		m.stats.Findings[kind]++
		m.stats.LastFinding, m.stats.LastFindingAt = f.Error(), m.stats.LastCheckAt
		ev := log.Error().Str("finding", kind).Int64("accepted_size", f.Accepted).Int64("checkpoint_size", f.Size)
		if f.Seq > 0 {
			ev = ev.Uint64("seq", f.Seq)
		}
		ev.Err(f.Err).Msg("monitor: the ledger served something refused")
	case err != nil:
		m.stats.Errors++
		log.Warn().Err(err).Msg("monitor: check failed")
	case res.NoCheckpoint:
		log.Info().Msg("monitor: the ledger serves no checkpoint yet")
	default:
		m.stats.Cosigners = res.Cosigners
		if res.Entries > 0 || res.Size != res.Previous {
			log.Info().Int64("size", res.Size).Int64("from", res.Previous).Int64("entries", res.Entries).Strs("cosigners", res.Cosigners).Msg("monitor: checkpoint verified")
		} else {
			log.Debug().Int64("size", res.Size).Msg("monitor: no new checkpoint")
		}
	}
	return res, err
}

func (m *Monitor) check(ctx context.Context) (Result, error) {
	s := m.s
	res := Result{Previous: s.acceptedSize(), Size: s.acceptedSize()}
	if s.accepted != nil {
		res.Root = s.accepted.Hash
	}
	// A copy interrupted: go on toward the target first.
	if s.target != nil {
		n, err := m.copyTo(ctx, *s.target, s.targetNote)
		res.Entries += n
		if err != nil {
			return res, err
		}
		res.Size, res.Root = s.accepted.Size, s.accepted.Hash
	}
	witnessed := len(m.o.Witnesses.Keys) > 0
	cp, signed, none, err := m.checkpoint(ctx, !witnessed)
	if err != nil {
		return res, err
	}
	if none {
		res.NoCheckpoint = s.accepted == nil
		return res, m.checkUnwitnessed(ctx, witnessed)
	}
	if witnessed {
		if res.Cosigners, err = m.o.Witnesses.Check(signed); err != nil {
			return res, &Finding{Kind: ErrBadCheckpoint, Accepted: s.acceptedSize(), Size: cp.Size, Err: err}
		}
	}
	if s.accepted != nil {
		if err := m.extends(ctx, *s.accepted, cp); err != nil {
			return res, err
		}
		if cp.Size == s.accepted.Size {
			return res, m.checkUnwitnessed(ctx, witnessed)
		}
	}
	if err := s.setTarget(cp, signed); err != nil {
		return res, err
	}
	n, err := m.copyTo(ctx, cp, signed)
	res.Entries += n
	if err != nil {
		return res, err
	}
	res.Size, res.Root = cp.Size, cp.Hash
	return res, m.checkUnwitnessed(ctx, witnessed)
}

// checkpoint fetches and opens the ledger's witnessed (or, unwitnessed,
// latest signed) checkpoint; none when the ledger has none to serve.
func (m *Monitor) checkpoint(ctx context.Context, unwitnessed bool) (cp evidence.Checkpoint, signed []byte, none bool, err error) {
	path := "/v1/checkpoint"
	if unwitnessed {
		path += "?unwitnessed=1"
	}
	signed, err = m.get(ctx, path)
	if apiCode(err) == api.CodeNoCheckpoint {
		return cp, nil, true, nil
	}
	if err != nil {
		return cp, nil, false, err
	}
	cp, _, err = evidence.OpenCheckpoint(signed, m.verifier)
	if err != nil {
		size := int64(-1)
		if u, uerr := evidence.ParseUnverified(signed); uerr == nil {
			size = u.Size
		}
		return cp, nil, false, &Finding{Kind: ErrBadCheckpoint, Accepted: m.s.acceptedSize(), Size: size, Err: err}
	}
	return cp, signed, false, nil
}

// extends checks that cp's tree extends old's: a shrink, a rewrite (the
// same size, another root) or a fork is a finding.
func (m *Monitor) extends(ctx context.Context, old, cp evidence.Checkpoint) error {
	switch {
	case cp.Size < old.Size:
		return &Finding{Kind: ErrShrink, Accepted: old.Size, Size: cp.Size,
			Err: fmt.Errorf("%w: from %d to %d leaves", evidence.ErrShrank, old.Size, cp.Size)}
	case cp.Size == old.Size:
		if cp.Hash != old.Hash {
			return &Finding{Kind: ErrRewritten, Accepted: old.Size, Size: cp.Size, Seq: m.firstDifference(ctx, cp),
				Err: fmt.Errorf("%w: two roots for %d leaves: %s accepted, %s now", evidence.ErrRewritten, old.Size, old.Hash, cp.Hash)}
		}
		return nil
	}
	return m.consistent(ctx, old, cp)
}

// checkUnwitnessed: when witnesses are required, the ledger's latest
// signed checkpoint, witnessed or not, must extend the accepted one too
// (it is not copied until the witnesses cosign it). A history the
// witnesses refused is a finding here as well: the monitor sees the split
// view the witnesses stopped.
func (m *Monitor) checkUnwitnessed(ctx context.Context, witnessed bool) error {
	if !witnessed || m.s.accepted == nil {
		return nil
	}
	cp, _, none, err := m.checkpoint(ctx, true)
	if err != nil || none {
		return err
	}
	return m.extends(ctx, *m.s.accepted, cp)
}

// consistent checks that newer's tree extends older's, by a consistency
// proof built from the ledger's hash tiles (each checked against newer's
// root).
func (m *Monitor) consistent(ctx context.Context, older, newer evidence.Checkpoint) error {
	if older.Size == 0 {
		return evidence.VerifyConsistency(older, newer, nil) // every tree extends the empty one
	}
	tr := &tileReader{ctx: ctx, m: m}
	hr := tlog.TileHashReader(newer.Tree(), tr)
	proof, err := tlog.ProveTree(newer.Size, older.Size, hr)
	if err != nil {
		return m.tileError(tr, older.Size, newer.Size, 0, fmt.Errorf("consistency proof from %d to %d: %w", older.Size, newer.Size, err))
	}
	if err := evidence.VerifyConsistency(older, newer, proof); err != nil {
		return &Finding{Kind: ErrFork, Accepted: older.Size, Size: newer.Size, Seq: m.firstDifference(ctx, newer), Err: err}
	}
	return nil
}

// tileError classifies a failure to read hashes from the tiles: a fetch
// the ledger answered "not there" or "damaged" (ErrMissing), another fetch
// failure (not a finding), or tiles that do not hash to the signed root
// (ErrAltered).
func (m *Monitor) tileError(tr *tileReader, accepted, size int64, seq uint64, err error) error {
	switch {
	case tr.fetchErr != nil && missingAnswer(tr.fetchErr):
		if d := damagedSeq(tr.fetchErr); d > 0 {
			seq = d
		}
		return &Finding{Kind: ErrMissing, Accepted: accepted, Size: size, Seq: seq, Err: tr.fetchErr}
	case tr.fetchErr != nil:
		return tr.fetchErr
	case ctxErr(err):
		return err
	}
	return &Finding{Kind: ErrAltered, Accepted: accepted, Size: size, Seq: seq, Err: fmt.Errorf("the ledger's hash tiles do not hash to the signed root: %w", err)}
}

func ctxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// batchBundles is how many entry bundles are fetched before they are
// verified and written.
const batchBundles = 16

// copyTo downloads, verifies and appends the entries from the copy's end
// to cp's size, then accepts cp. cp is already known to extend the
// accepted checkpoint.
func (m *Monitor) copyTo(ctx context.Context, cp evidence.Checkpoint, signed []byte) (copied int64, err error) {
	s := m.s
	defer func() {
		if err != nil {
			// The lines verified before the failure belong to cp's tree
			// (the target): keep them.
			if ferr := s.flush(); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
	}()
	accepted := s.acceptedSize()
	tr := &tileReader{ctx: ctx, m: m}
	hr := tlog.TileHashReader(cp.Tree(), tr)
	for next := s.tree.Size(); next < cp.Size; {
		first := next / evidence.EntryBundleWidth
		last := min((cp.Size-1)/evidence.EntryBundleWidth, first+batchBundles-1)
		nb := int(last - first + 1)
		bundles := make([][][]byte, nb)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(m.o.Parallel)
		for i := range nb {
			n := first + int64(i)
			w := int(min(cp.Size-n*evidence.EntryBundleWidth, evidence.EntryBundleWidth))
			g.Go(func() error {
				b, err := m.bundle(gctx, n, w)
				bundles[i] = b
				return err
			})
		}
		if err := g.Wait(); err != nil {
			var f *Finding
			if errors.As(err, &f) {
				f.Accepted, f.Size = accepted, cp.Size
				return copied, f
			}
			if missingAnswer(err) {
				seq := damagedSeq(err)
				if seq == 0 {
					seq = uint64(next) + 1
				}
				return copied, &Finding{Kind: ErrMissing, Accepted: accepted, Size: cp.Size, Seq: seq, Err: err}
			}
			return copied, err
		}
		// The tree's leaf hashes of these bundles, from the tiles.
		lo, hi := first*evidence.EntryBundleWidth, min((last+1)*evidence.EntryBundleWidth, cp.Size)
		idx := make([]int64, 0, hi-lo)
		for i := lo; i < hi; i++ {
			idx = append(idx, tlog.StoredHashIndex(0, i))
		}
		want, err := hr.ReadHashes(idx)
		if err != nil {
			return copied, m.tileError(tr, accepted, cp.Size, uint64(lo)+1, fmt.Errorf("leaf hashes %d..%d: %w", lo, hi-1, err))
		}
		for bi, leaves := range bundles {
			for j, b := range leaves {
				i := (first+int64(bi))*evidence.EntryBundleWidth + int64(j)
				seq := uint64(i) + 1
				h := evidence.LeafHash(b)
				if h != want[i-lo] {
					return copied, &Finding{Kind: ErrAltered, Accepted: accepted, Size: cp.Size, Seq: seq,
						Err: fmt.Errorf("%w: entry %d of bundle %d hashes to %s, the signed tree holds %s", evidence.ErrInclusion, j, first+int64(bi), h, want[i-lo])}
				}
				if i < next {
					continue // already in the copy; checked again all the same
				}
				l, err := evidence.ParseLeaf(b)
				if err == nil && l.Seq != seq {
					err = fmt.Errorf("%w: leaf %d holds seq %d", evidence.ErrMismatch, i, l.Seq)
				}
				if err != nil {
					return copied, &Finding{Kind: ErrAltered, Accepted: accepted, Size: cp.Size, Seq: seq, Err: err}
				}
				if err := s.appendLeaf(l, h); err != nil {
					return copied, err
				}
				copied++
			}
		}
		if err := s.flush(); err != nil {
			return copied, err
		}
		m.mu.Lock()
		m.stats.EntriesVerified += hi - next
		m.mu.Unlock()
		next = hi
	}
	if s.tree.Root() != cp.Hash {
		// Cannot happen when the leaf hashes matched the tiles: a bug or
		// a copy changed under the monitor.
		return copied, fmt.Errorf("%w: the copy's %d leaves have root %s, the checkpoint %s", ErrState, s.tree.Size(), s.tree.Root(), cp.Hash)
	}
	if err := s.accept(cp, signed); err != nil {
		return copied, err
	}
	return copied, nil
}

// firstDifference returns the first sequence whose leaf in cp's tree (its
// hash tiles, checked against cp's root) differs from the copy's, 0 when
// it cannot tell (the tiles unavailable or inconsistent, no difference in
// the copy's range). It is only called for a finding, and reads the copy.
func (m *Monitor) firstDifference(ctx context.Context, cp evidence.Checkpoint) uint64 {
	ours, err := m.s.leafHashes(min(cp.Size, m.s.acceptedSize()))
	if err != nil {
		m.o.Logger.Warn().Err(err).Msg("monitor: reading the copy to locate a difference")
		return 0
	}
	hr := tlog.TileHashReader(cp.Tree(), &tileReader{ctx: ctx, m: m})
	for lo := int64(0); lo < int64(len(ours)); lo += evidence.EntryBundleWidth {
		hi := min(lo+evidence.EntryBundleWidth, int64(len(ours)))
		idx := make([]int64, 0, hi-lo)
		for i := lo; i < hi; i++ {
			idx = append(idx, tlog.StoredHashIndex(0, i))
		}
		theirs, err := hr.ReadHashes(idx)
		if err != nil {
			return 0
		}
		for i := lo; i < hi; i++ {
			if theirs[i-lo] != ours[i] {
				return uint64(i) + 1
			}
		}
	}
	return 0
}
