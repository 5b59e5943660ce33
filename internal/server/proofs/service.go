package proofs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/api/evidence"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/integrity"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/subjects"
)

// DefaultInterval is the default of Options.Interval.
const DefaultInterval = time.Second

// Errors of the service.
var (
	// ErrForked: the tree the projection holds does not extend the last
	// checkpoint signed (wraps evidence.ErrForked or ErrShrank's kind);
	// nothing more is signed.
	ErrForked = errors.New("proofs: the projection's tree does not extend the last signed checkpoint")
	// ErrNotFound: no such proposal, or no checkpoint of the size asked.
	ErrNotFound = errors.New("proofs: not found")
	// ErrBeyondTree: a size or sequence past what the tree (or the last
	// checkpoint) covers.
	ErrBeyondTree = errors.New("proofs: beyond the tree")
	// ErrNotCovered: no checkpoint covers the events yet (the next one is
	// at most an interval away): retry.
	ErrNotCovered = errors.New("proofs: no checkpoint covers the events yet")
	// ErrLeafMismatch: a message read from the stream is not the leaf the
	// tree holds for its sequence: the stream changed under the
	// projection.
	ErrLeafMismatch = errors.New("proofs: the stream's message is not the tree's leaf")
)

// Tree is what the proofs read of the projection. *projections.Store
// implements it. Its stored hashes never change once written, so reads of
// sizes up to TreeSize are consistent without a snapshot.
type Tree interface {
	tlog.HashReader
	TreeSize() int64
	TreeHash(n int64) (tlog.Hash, error)
	LeafHash(index int64) (tlog.Hash, error)
	History(space, key string) ([]api.HistoryEntry, error)
}

// Options configures a Service.
type Options struct {
	// SignerKey is the checkpoint signing key (LoadKey). Required.
	SignerKey string
	// Dir is the checkpoint log's directory. Required.
	Dir string
	// Tree returns the projection in place (it changes with an online
	// rebuild). Required by Run.
	Tree func() Tree
	// Conn publishes each new checkpoint on subjects.Checkpoint(origin);
	// nil publishes nothing.
	Conn *nats.Conn
	// JS reads the stored messages of a proposal's history (the proof
	// routes). Required by ProposalProof.
	JS jetstream.JetStream
	// Interval is the shortest time between two checkpoints. Default
	// DefaultInterval.
	Interval time.Duration
	// Integrity, if set, is the damage found in the log: signing stops
	// at the last good size while it holds some, a proof that meets it
	// is an *integrity.DamagedError, and a tree that no longer extends
	// the checkpoints signed is reported to it (kind rewritten).
	Integrity *integrity.State
	// Logger gets a line per checkpoint (debug) and per failure.
	Logger zerolog.Logger
}

// Validate fills defaults and checks the options.
func (o *Options) Validate() error {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	switch {
	case o.SignerKey == "":
		return fmt.Errorf("proofs: options: SignerKey is required")
	case o.Dir == "":
		return fmt.Errorf("proofs: options: Dir is required")
	case o.Interval < 0:
		return fmt.Errorf("proofs: options: negative Interval %v", o.Interval)
	}
	return nil
}

// Service signs, keeps and publishes checkpoints and builds proofs. Run
// is its one goroutine's body (the caller owns it: cancel its ctx and
// wait for it); the other methods are safe for concurrent use. Close
// closes the checkpoint log and is safe twice.
type Service struct {
	opts     Options
	log      zerolog.Logger
	signer   note.Signer
	verifier note.Verifier
	vkey     string
	cps      *Log

	witnesses atomic.Bool // UseWitnesses

	signMu  sync.Mutex // serialises signing
	probMu  sync.Mutex
	problem error // set when the tree stopped extending the last checkpoint
	held    *api.SigningStopped
}

// New opens the checkpoint log and parses the key.
func New(o Options) (*Service, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	signer, err := evidence.NewSigner(o.SignerKey)
	if err != nil {
		return nil, fmt.Errorf("proofs: %w", err)
	}
	vkey, err := evidence.VerifierKeyOf(o.SignerKey)
	if err != nil {
		return nil, fmt.Errorf("proofs: %w", err)
	}
	verifier, err := evidence.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("proofs: %w", err)
	}
	cps, err := OpenLog(o.Dir)
	if err != nil {
		return nil, err
	}
	if e, ok := cps.Latest(); ok && e.Checkpoint.Origin != signer.Name() {
		_ = cps.Close()
		return nil, fmt.Errorf("%w: the checkpoint log in %s is %q's, the key signs for %q", ErrKeyFile, o.Dir, e.Checkpoint.Origin, signer.Name())
	}
	return &Service{opts: o, log: o.Logger.With().Str(logging.KeyComponent, "checkpoints").Logger(),
		signer: signer, verifier: verifier, vkey: vkey, cps: cps}, nil
}

// Origin returns the log's origin: the key's name.
func (s *Service) Origin() string { return s.signer.Name() }

// VerifierKey returns the verifier key of the signing key (C2SP signed
// note format), which is all a third party needs to check checkpoints and
// bundles.
func (s *Service) VerifierKey() string { return s.vkey }

// Verifier returns the verifier of the signing key.
func (s *Service) Verifier() note.Verifier { return s.verifier }

// Log returns the checkpoint log.
func (s *Service) Log() *Log { return s.cps }

// Problem returns why the service stopped signing, nil while it signs.
func (s *Service) Problem() error {
	s.probMu.Lock()
	defer s.probMu.Unlock()
	return s.problem
}

// SigningStopped says why signing stopped and at which size, nil while
// the service signs.
func (s *Service) SigningStopped() *api.SigningStopped {
	s.probMu.Lock()
	defer s.probMu.Unlock()
	if s.problem != nil {
		size := int64(0)
		if e, ok := s.cps.Latest(); ok {
			size = e.Checkpoint.Size
		}
		return &api.SigningStopped{Size: size, Reason: s.problem.Error()}
	}
	if s.held != nil {
		c := *s.held
		return &c
	}
	return nil
}

func (s *Service) setHeld(h *api.SigningStopped) {
	s.probMu.Lock()
	defer s.probMu.Unlock()
	if h == nil && s.held != nil {
		s.log.Warn().Msg("signing again: the damage is cleared")
	} else if h != nil && s.held == nil {
		s.log.Error().Int64("size", h.Size).Str("reason", h.Reason).Msg("signing stopped at the last good size")
	}
	s.held = h
}

// Close closes the checkpoint log. Safe to call twice.
func (s *Service) Close() error { return s.cps.Close() }

// Run signs a checkpoint of the tree whenever it has grown, at most every
// Interval (and one of the empty tree when there is none), until ctx is
// done; then it signs one last time (what was folded before the stop) and
// returns nil. A failure to sign or store is logged and
// retried at the next tick; a tree that does not extend the last
// checkpoint stops signing (Problem).
func (s *Service) Run(ctx context.Context) error {
	if s.opts.Tree == nil {
		return fmt.Errorf("proofs: Run needs Options.Tree")
	}
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		if _, err := s.Checkpoint(s.opts.Tree()); err != nil && !errors.Is(err, projections.ErrClosed) {
			s.log.Error().Err(err).Msg("checkpoint")
		}
		select {
		case <-ctx.Done():
			// One last checkpoint of what was folded before the stop.
			if _, err := s.Checkpoint(s.opts.Tree()); err != nil && !errors.Is(err, projections.ErrClosed) {
				s.log.Error().Err(err).Msg("checkpoint")
			}
			return nil
		case <-t.C:
		}
	}
}

// Checkpoint signs, stores and publishes a checkpoint of tree's current
// size when it is larger than the last one's (or when there is none yet),
// and returns the latest checkpoint. It refuses (ErrForked, also kept as
// Problem) a tree that does not extend the last checkpoint.
func (s *Service) Checkpoint(tree Tree) (Entry, error) {
	s.signMu.Lock()
	defer s.signMu.Unlock()
	if err := s.Problem(); err != nil {
		return Entry{}, err
	}
	n := tree.TreeSize()
	last, have := s.cps.Latest()
	if s.opts.Integrity != nil {
		if lim, why, ok := s.opts.Integrity.SignLimit(); ok {
			lim = max(lim, 0)
			if have {
				lim = max(lim, min(last.Checkpoint.Size, n))
			}
			s.setHeld(&api.SigningStopped{Size: min(lim, n), Reason: why})
			n = min(n, lim)
		} else {
			s.setHeld(nil)
		}
	}
	if have && n <= last.Checkpoint.Size {
		// Not grown, or behind (a projection catching up after a rebuild
		// from scratch): nothing to sign yet.
		if n == last.Checkpoint.Size {
			if h, err := tree.TreeHash(n); err == nil && h != last.Checkpoint.Hash {
				return Entry{}, s.rewritten(tree, fmt.Errorf("%w: %w", ErrForked, evidence.VerifyConsistency(last.Checkpoint, evidence.Checkpoint{Origin: last.Checkpoint.Origin, Size: n, Hash: h}, nil)))
			}
		}
		return last, nil
	}
	root, err := tree.TreeHash(n)
	if err != nil {
		return Entry{}, err
	}
	cp := evidence.Checkpoint{Origin: s.Origin(), Size: n, Hash: root}
	if have && last.Checkpoint.Size > 0 {
		p, err := tlog.ProveTree(n, last.Checkpoint.Size, tree)
		if err != nil {
			return Entry{}, err
		}
		if err := evidence.VerifyConsistency(last.Checkpoint, cp, p); err != nil {
			return Entry{}, s.rewritten(tree, fmt.Errorf("%w: %w", ErrForked, err))
		}
	}
	signed, err := evidence.SignCheckpoint(cp, s.signer)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Checkpoint: cp, Note: signed}
	if err := s.cps.Add(e); err != nil {
		return Entry{}, err
	}
	if s.opts.Conn != nil {
		if err := s.opts.Conn.Publish(subjects.Checkpoint(cp.Origin), signed); err != nil {
			s.log.Warn().Err(err).Int64("size", n).Msg("publish checkpoint")
		}
	}
	s.log.Debug().Int64("size", n).Str("root", root.String()).Msg("checkpoint")
	return e, nil
}

func (s *Service) fork(err error) error {
	s.probMu.Lock()
	defer s.probMu.Unlock()
	if s.problem == nil {
		s.problem = err
		s.log.Error().Err(err).Msg("not signing: the tree does not extend the last checkpoint")
	}
	return s.problem
}

// rewritten reports to Integrity that the tree of size n has root got
// where the checkpoint signed for that size has want, and returns the
// fork error.
func (s *Service) rewritten(tree Tree, err error) error {
	if s.opts.Integrity != nil {
		if d, ok := s.findRewrite(tree); ok {
			s.opts.Integrity.Report(d)
		}
	}
	return s.fork(err)
}

// findRewrite finds the smallest signed checkpoint the tree no longer
// matches (the rewritten leaf is at or before its size).
func (s *Service) findRewrite(tree Tree) (api.LogDamage, bool) {
	n := tree.TreeSize()
	for from := int64(1); ; {
		es, more, err := s.cps.List(from, 1000)
		if err != nil {
			return api.LogDamage{}, false
		}
		for _, e := range es {
			size := e.Checkpoint.Size
			if size == 0 {
				continue
			}
			if size > n {
				return api.LogDamage{}, false
			}
			h, err := tree.TreeHash(size)
			if err != nil {
				return api.LogDamage{}, false
			}
			if h != e.Checkpoint.Hash {
				return integrity.NewDamage(api.DamageRewritten, uint64(size), e.Checkpoint.Hash.String(), h.String()), true
			}
		}
		if !more || len(es) == 0 {
			return api.LogDamage{}, false
		}
		from = es[len(es)-1].Checkpoint.Size + 1
	}
}
