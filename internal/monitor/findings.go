package monitor

import (
	"errors"
	"fmt"
)

// ErrFinding: the ledger served something the monitor refuses. Every
// *Finding matches it and exactly one of the kinds below.
var ErrFinding = errors.New("monitor: finding")

// The kinds of finding.
var (
	// ErrFork: a checkpoint whose tree does not extend the accepted one
	// (the consistency proof fails).
	ErrFork = errors.New("monitor: log forked")
	// ErrRewritten: a checkpoint of the accepted size with another root.
	ErrRewritten = errors.New("monitor: log rewritten")
	// ErrShrink: a checkpoint of fewer leaves than the accepted one.
	ErrShrink = errors.New("monitor: log shrank")
	// ErrAltered: entries or tiles that do not hash to the signed tree,
	// or a leaf that does not decode or names another sequence.
	ErrAltered = errors.New("monitor: entries altered")
	// ErrMissing: the ledger does not serve entries or tiles its signed
	// tree holds (not found, or refused as damaged).
	ErrMissing = errors.New("monitor: entries missing")
	// ErrBadCheckpoint: a checkpoint that does not verify with the
	// ledger's key, or lacks the witnesses' quorum.
	ErrBadCheckpoint = errors.New("monitor: checkpoint refused")
)

// Finding is what the monitor refused, with the sizes and sequence it
// concerns.
type Finding struct {
	// Kind is one of ErrFork, ErrRewritten, ErrShrink, ErrAltered,
	// ErrMissing, ErrBadCheckpoint.
	Kind error
	// Accepted is the size of the last checkpoint the monitor accepted.
	Accepted int64
	// Size is the size of the checkpoint refused (-1: none could be read).
	Size int64
	// Seq is the first sequence concerned (ErrAltered, ErrMissing), else 0.
	Seq uint64
	// Err is the cause (an evidence error, the ledger's answer).
	Err error
}

func (f *Finding) Error() string {
	s := fmt.Sprintf("%v: accepted size %d, checkpoint size %d", f.Kind, f.Accepted, f.Size)
	if f.Seq > 0 {
		s += fmt.Sprintf(", seq %d", f.Seq)
	}
	if f.Err != nil {
		s += ": " + f.Err.Error()
	}
	return s
}

// Unwrap returns ErrFinding, the kind and the cause.
func (f *Finding) Unwrap() []error {
	errs := []error{ErrFinding, f.Kind}
	if f.Err != nil {
		errs = append(errs, f.Err)
	}
	return errs
}

// KindName is the short name of a finding's kind, as in metrics and logs:
// fork, rewritten, shrink, altered, missing, bad_checkpoint.
func KindName(kind error) string {
	switch kind {
	case ErrFork:
		return "fork"
	case ErrRewritten:
		return "rewritten"
	case ErrShrink:
		return "shrink"
	case ErrAltered:
		return "altered"
	case ErrMissing:
		return "missing"
	case ErrBadCheckpoint:
		return "bad_checkpoint"
	}
	return "other"
}
