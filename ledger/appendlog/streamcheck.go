package appendlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mewledger/ledger/ledger"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mewledger/ledger/subjects"
)

// ErrStreamMissing is returned by CheckStream when the LEDGER stream does
// not exist (it was deleted, or this is not the ledger's server).
var ErrStreamMissing = errors.New("ledger: stream " + subjects.StreamName + " is missing")

// StreamState is what CheckStream found: the stream's identity (its
// creation time: a stream deleted and created again has another), its
// extent, its import marker, and the managed settings it put back.
type StreamState struct {
	Created         time.Time
	FirstSeq        uint64
	LastSeq         uint64
	Msgs            uint64
	ImportedThrough uint64
	// Restored lists the managed settings (EnsureStream) that had been
	// changed and were put back, each as "setting was X, put back to Y".
	Restored []string
}

// Identity is the stream identity to record with a projection: the
// stream's name and creation time (RFC 3339, nanoseconds, UTC).
func (s StreamState) Identity() string {
	return subjects.StreamName + " created " + s.Created.UTC().Format(time.RFC3339Nano)
}

// CheckStream reads the LEDGER stream of a running ledger. It never
// creates it: a missing stream is ErrStreamMissing. A setting the ledger
// cannot use (subjects, deny flags, storage, ...) is ErrStreamConfig
// naming it, as in EnsureStream. The settings the ledger manages (o's
// limits, max age, discard policy, ...) are put back when someone changed
// them, and listed in StreamState.Restored.
func CheckStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (StreamState, error) {
	if err := o.Validate(); err != nil {
		return StreamState{}, err
	}
	st, err := js.Stream(ctx, subjects.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return StreamState{}, ErrStreamMissing
	}
	if err != nil {
		return StreamState{}, fmt.Errorf("ledger: stream %s: %w", subjects.StreamName, err)
	}
	info := st.CachedInfo()
	state := StreamState{
		Created:         info.Created,
		FirstSeq:        info.State.FirstSeq,
		LastSeq:         info.State.LastSeq,
		Msgs:            info.State.Msgs,
		ImportedThrough: ledger.ImportedThrough(info.Config.Metadata),
	}
	if err := checkCompatible(info.Config); err != nil {
		return state, err
	}
	want := o.StreamConfig()
	if upd, changed := managed(info.Config, want); changed {
		diff := managedDiff(info.Config, want)
		if len(diff) == 0 {
			diff = []string{"a managed setting was changed, put back"}
		}
		if _, err := js.UpdateStream(ctx, upd); err != nil {
			return state, fmt.Errorf("%w: put back %v: %w", ErrStreamConfig, diff, err)
		}
		state.Restored = diff
	}
	return state, nil
}

// managedDiff describes each managed setting of have that differs from
// want (see managed).
func managedDiff(have, want jetstream.StreamConfig) []string {
	var d []string
	add := func(name string, h, w any) {
		d = append(d, fmt.Sprintf("%s was %v, put back to %v", name, h, w))
	}
	if have.Replicas != want.Replicas {
		add("replicas", have.Replicas, want.Replicas)
	}
	if have.Duplicates != want.Duplicates {
		add("duplicate_window", have.Duplicates, want.Duplicates)
	}
	if have.MaxMsgSize != want.MaxMsgSize {
		add("max_msg_size", have.MaxMsgSize, want.MaxMsgSize)
	}
	if have.MaxAge != want.MaxAge {
		add("max_age", have.MaxAge, want.MaxAge)
	}
	if have.MaxMsgs != want.MaxMsgs {
		add("max_msgs", have.MaxMsgs, want.MaxMsgs)
	}
	if have.MaxBytes != want.MaxBytes {
		add("max_bytes", have.MaxBytes, want.MaxBytes)
	}
	if have.MaxMsgsPerSubject != want.MaxMsgsPerSubject {
		add("max_msgs_per_subject", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	}
	if have.Discard != want.Discard {
		add("discard", have.Discard, want.Discard)
	}
	if have.DiscardNewPerSubject {
		add("discard_new_per_subject", true, false)
	}
	if have.AllowDirect != want.AllowDirect {
		add("allow_direct", have.AllowDirect, want.AllowDirect)
	}
	if have.AllowAtomicPublish != want.AllowAtomicPublish {
		add("allow_atomic", have.AllowAtomicPublish, want.AllowAtomicPublish)
	}
	if have.Description != want.Description {
		add("description", fmt.Sprintf("%q", have.Description), fmt.Sprintf("%q", want.Description))
	}
	return slices.Clip(d)
}
