// Package repair rebuilds, inspects and verifies projections from the log
// (contract §9): fold the stream into a fresh Pebble directory and swap it in,
// answer queries as of a past sequence or time from a temporary
// projection, and check that a live projection equals a rebuild.
//
// Everything here folds with projector.Rebuild: there is one fold, and a
// rebuilt store is byte for byte what the projector would have written at
// the same sequence.
//
// Contract: functions take ctx first and block until done or ctx ends;
// they start no goroutines that outlive them. A store returned to the
// caller is open and the caller's to close; a View is removed from disk by
// its Close.
package repair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/projections/projector"
)

// Errors of this package.
var (
	// ErrBeyondLog is returned (wrapping projections.ErrBeyondLog) for a
	// point after the end of the log.
	ErrBeyondLog = projector.ErrBeyondLog
	// ErrNoPoint: At needs a sequence or a time.
	ErrNoPoint = errors.New("repair: a sequence or a time is required")
	// ErrDirInUse: the target directory of a rebuild exists and is not
	// empty.
	ErrDirInUse = errors.New("repair: directory is not empty")
	// ErrMismatch is wrapped by Verify's error when the projection differs
	// from the rebuild.
	ErrMismatch = errors.New("repair: projection differs from the log")
)

// Options are common to the functions of this package.
type Options struct {
	// TempDir is where temporary projections are made; default
	// os.TempDir().
	TempDir string
	// BatchSize bounds events per Pebble commit; default
	// projections.DefaultBatchSize.
	BatchSize int
	// Progress, if set, receives the sequence reached and the target
	// sequence after each commit.
	Progress func(done, total uint64)
	// Logger receives a line for each leftover of an interrupted rebuild
	// that OfflineRebuild removes. Zero: none.
	Logger zerolog.Logger
	// Folder is the fold (with the ledger's mark keys, contract §14);
	// default fold.NewFolder(), which honours no bridge mark.
	Folder *fold.Folder
	// MemTableSize and CacheSize size the Pebble store of a temporary
	// projection made by At (its memory is about CacheSize + 2 ×
	// MemTableSize); 0: the store's defaults.
	MemTableSize uint64
	CacheSize    int64
}

// RebuildInto folds the LEDGER stream into a new store in dir (which must
// not exist or be empty, ErrDirInUse otherwise) up to upTo (0: the end of
// the log when it starts; after the end: ErrBeyondLog), and returns the
// open store. On error the directory is removed.
//
// It is the building block of an online rebuild: RebuildInto a directory
// next to the live one while the service answers from the live store, call
// projector.Rebuild on the returned store again to catch up (it resumes
// from the store's checkpoint), then swap (see Replace).
func RebuildInto(ctx context.Context, js jetstream.JetStream, dir string, upTo uint64, o Options) (*projections.Store, error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrDirInUse, dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("repair: rebuild into %s: %w", dir, err)
	}
	// A fresh directory: written without a WAL (StoreOptions.NoWAL). A
	// crash leaves whole batches up to the flushed checkpoint, and the
	// directory is removed and folded again anyway (RemoveLeftovers).
	s, err := projections.OpenStore(projections.StoreOptions{Dir: dir, NoWAL: true})
	if err != nil {
		return nil, fmt.Errorf("repair: rebuild into %s: %w", dir, err)
	}
	if _, err := projector.Rebuild(ctx, js, s, projector.RebuildOptions{Folder: o.Folder, UpToSeq: upTo, BatchSize: o.BatchSize, Progress: o.Progress}); err != nil {
		_ = s.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("repair: rebuild into %s: %w", dir, err)
	}
	return s, nil
}

// Point is a position in the log: a sequence (the state after folding it)
// or a ledger time (the state after every event up to the first one after
// it, as projector.RebuildOptions.UpToTime).
type Point struct {
	Seq  uint64
	Time time.Time
}

func (p Point) String() string {
	if p.Seq > 0 {
		return fmt.Sprintf("seq %d", p.Seq)
	}
	return "time " + p.Time.UTC().Format(time.RFC3339Nano)
}

// View is a temporary projection as of a Point. It is a
// *projections.Store, so it answers Get, History, List and Stats (it
// implements the API's Reader); AppliedSeq is the last sequence it folded.
// Close closes it and removes its directory.
type View struct {
	*projections.Store
	dir   string
	Point Point
}

// Close closes the store and removes its directory.
func (v *View) Close() error {
	err := v.Store.Close()
	if rerr := os.RemoveAll(v.dir); err == nil && rerr != nil {
		err = fmt.Errorf("repair: remove %s: %w", v.dir, rerr)
	}
	return err
}

// At folds the log into a temporary store up to p and returns it. A
// sequence after the end of the log, or a time in the future (events may
// still arrive before it), is ErrBeyondLog.
func At(ctx context.Context, js jetstream.JetStream, p Point, o Options) (*View, error) {
	switch {
	case p.Seq == 0 && p.Time.IsZero():
		return nil, ErrNoPoint
	case p.Seq > 0 && !p.Time.IsZero():
		return nil, fmt.Errorf("repair: give a sequence or a time, not both")
	case !p.Time.IsZero() && p.Time.After(time.Now()):
		return nil, fmt.Errorf("%w: time %s is in the future", ErrBeyondLog, p.Time.UTC().Format(time.RFC3339Nano))
	}
	dir, err := os.MkdirTemp(o.TempDir, "ledger-at-*")
	if err != nil {
		return nil, fmt.Errorf("repair: temporary projection: %w", err)
	}
	s, err := projections.OpenStore(projections.StoreOptions{Dir: filepath.Join(dir, "projection"), NoWAL: true, // discarded after use
		MemTableSize: o.MemTableSize, CacheSize: o.CacheSize})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("repair: temporary projection: %w", err)
	}
	v := &View{Store: s, dir: dir, Point: p}
	if _, err := projector.Rebuild(ctx, js, s, projector.RebuildOptions{Folder: o.Folder, UpToSeq: p.Seq, UpToTime: p.Time, BatchSize: o.BatchSize, Progress: o.Progress}); err != nil {
		_ = v.Close()
		return nil, fmt.Errorf("repair: projection as of %s: %w", p, err)
	}
	return v, nil
}

// VerifyResult is the outcome of Verify.
type VerifyResult struct {
	// Seq is the sequence both projections are at.
	Seq uint64 `json:"seq"`
	// Digest is the live projection's projections.Store.Digest when it
	// matches.
	Digest string `json:"digest,omitempty"`
	// TreeRoot is the root hash (standard base64) of the Merkle tree of
	// Seq leaves both projections hold when they match (contract §16: the
	// comparison covers the tree's stored hashes): a signed checkpoint of
	// Seq leaves names the same root.
	TreeRoot string `json:"tree_root,omitempty"`
	// Difference is the first difference (nil when they match).
	Difference *api.Difference `json:"difference,omitempty"`
}

// Verify folds the log into a temporary store up to live's checkpoint and
// compares the two (projections.Compare). live must not change while
// Verify runs (stop its projector, or Pause it: the comparison reads a
// snapshot of each store, but the checkpoint is read first). A
// difference is returned in the result and as an error wrapping
// ErrMismatch.
func Verify(ctx context.Context, js jetstream.JetStream, live *projections.Store, o Options) (VerifyResult, error) {
	seq := live.AppliedSeq()
	res := VerifyResult{Seq: seq}
	dir, err := os.MkdirTemp(o.TempDir, "ledger-verify-*")
	if err != nil {
		return res, fmt.Errorf("repair: verify: %w", err)
	}
	defer os.RemoveAll(dir)
	fresh, err := projections.OpenStore(projections.StoreOptions{Dir: filepath.Join(dir, "projection"), NoWAL: true})
	if err != nil {
		return res, fmt.Errorf("repair: verify: %w", err)
	}
	defer fresh.Close()
	if seq > 0 {
		if _, err := projector.Rebuild(ctx, js, fresh, projector.RebuildOptions{Folder: o.Folder, UpToSeq: seq, BatchSize: o.BatchSize, Progress: o.Progress}); err != nil {
			return res, fmt.Errorf("repair: verify: rebuild to seq %d: %w", seq, err)
		}
	}
	if live.AppliedSeq() != seq {
		return res, fmt.Errorf("repair: verify: the live projection moved from seq %d to %d during the rebuild; stop or pause its projector", seq, live.AppliedSeq())
	}
	d, err := projections.Compare(live, fresh)
	if err != nil {
		return res, fmt.Errorf("repair: verify: %w", err)
	}
	if d != nil {
		res.Difference = d
		return res, fmt.Errorf("%w at seq %d: %s", ErrMismatch, seq, d.Format("live", "rebuild"))
	}
	if res.Digest, err = live.Digest(); err != nil {
		return res, fmt.Errorf("repair: verify: %w", err)
	}
	root, err := live.TreeHash(int64(seq))
	if err != nil {
		return res, fmt.Errorf("repair: verify: %w", err)
	}
	res.TreeRoot = root.String()
	return res, nil
}

// NewDirSuffix is appended to the projection directory for the rebuilt
// copy during a rebuild.
const NewDirSuffix = ".new"

// OfflineRebuild rebuilds the projection in dir from the log: it folds the
// whole stream into dir+NewDirSuffix (removing a leftover of an
// interrupted rebuild first), then swaps it in with Replace. Nothing may
// have dir open (stop `ledger serve`: Pebble allows one opener, and the
// swap renames directories). It returns the sequence folded.
func OfflineRebuild(ctx context.Context, js jetstream.JetStream, dir string, o Options) (uint64, error) {
	dir = filepath.Clean(dir)
	tmp := dir + NewDirSuffix
	if err := RemoveLeftovers(dir, o.Logger); err != nil {
		return 0, err
	}
	s, err := RebuildInto(ctx, js, tmp, 0, o)
	if err != nil {
		return 0, err
	}
	seq := s.AppliedSeq()
	if err := s.Close(); err != nil {
		_ = os.RemoveAll(tmp)
		return 0, fmt.Errorf("repair: close %s: %w", tmp, err)
	}
	if err := Replace(dir, tmp); err != nil {
		return 0, err
	}
	return seq, nil
}

// OldDirSuffix is appended to the projection directory for the old copy
// while Replace swaps by renames (not on Linux, where it exchanges).
const OldDirSuffix = ".old"

// RemoveLeftovers removes what an interrupted rebuild of the projection in
// dir left beside it (a process killed while it folded or swapped):
// dir+NewDirSuffix and dir+OldDirSuffix, with a warning line on log for
// each one found. The projection in dir is never touched: a swap is
// atomic on Linux, and elsewhere a missing dir is refolded from the log.
func RemoveLeftovers(dir string, log zerolog.Logger) error {
	dir = filepath.Clean(dir)
	for _, p := range []string{dir + NewDirSuffix, dir + OldDirSuffix} {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("repair: remove the leftover %s of an interrupted rebuild: %w", p, err)
		}
		log.Warn().Str("path", p).Msg("removed the leftover of an interrupted rebuild (a process stopped while it rebuilt the projection)")
	}
	return nil
}

// Replace puts the directory fresh in place of live and deletes the old
// one. Neither may be open. On Linux the two are exchanged in one atomic
// rename (renameat2 RENAME_EXCHANGE), so at every instant live is either
// the old or the new projection; elsewhere live is renamed aside first,
// and a crash between the two renames leaves no live directory, which the
// service treats as an empty projection and refolds from the log (the
// projection is a cache of the log; nothing is lost). When live does not
// exist, fresh is renamed to it.
func Replace(live, fresh string) error {
	live, fresh = filepath.Clean(live), filepath.Clean(fresh)
	if _, err := os.Stat(live); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(fresh, live); err != nil {
			return fmt.Errorf("repair: move %s to %s: %w", fresh, live, err)
		}
		return syncDir(filepath.Dir(live))
	}
	old, err := exchange(live, fresh)
	if err != nil {
		return fmt.Errorf("repair: swap %s with %s: %w", live, fresh, err)
	}
	if err := syncDir(filepath.Dir(live)); err != nil {
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("repair: remove the old projection %s: %w", old, err)
	}
	return nil
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("repair: sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("repair: sync %s: %w", dir, err)
	}
	return nil
}

// exchangeByRenames moves a aside, then b to a, and returns where a's
// content went. Not atomic: see Replace.
func exchangeByRenames(a, b string) (string, error) {
	old := a + OldDirSuffix
	if err := os.RemoveAll(old); err != nil {
		return "", err
	}
	if err := os.Rename(a, old); err != nil {
		return "", err
	}
	if err := os.Rename(b, a); err != nil {
		_ = os.Rename(old, a)
		return "", err
	}
	return old, nil
}
