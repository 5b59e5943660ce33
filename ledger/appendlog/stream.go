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

const (
	// HeaderHeadroom is the room above MaxEnvelopeBytes left for message
	// headers (Nats-Msg-Id, Nats-Expected-Stream, ...): a stream's
	// max_msg_size and a server's max_payload count headers too.
	HeaderHeadroom = 64 << 10
	// DefaultMaxMsgSize is the LEDGER stream's max_msg_size unless set. It
	// equals natsserver.DefaultMaxPayload, the embedded server's
	// max_payload; an external server needs max_payload at least this big
	// to take a 1 MiB envelope.
	DefaultMaxMsgSize = ledger.MaxEnvelopeBytes + HeaderHeadroom
	// DefaultDuplicateWindow is the LEDGER stream's duplicate window
	// unless set: how long a Nats-Msg-Id is remembered, and so how long an
	// append may be retried without being stored twice.
	DefaultDuplicateWindow = 2 * time.Minute
)

// ErrStreamConfig is returned (wrapped, with the offending setting) when
// the LEDGER stream exists with a configuration the ledger cannot use and
// must not change by itself, or when StreamOptions are invalid.
var ErrStreamConfig = errors.New("ledger: stream " + subjects.StreamName + " configuration")

// StreamOptions configures the LEDGER stream. The zero value is the
// single-node default.
type StreamOptions struct {
	// Replicas is the number of copies (1 on one node, 3 on a cluster,
	// contract §4). Default 1.
	Replicas int
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id.
	// Default DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// MaxMsgSize is the largest message the stream stores, headers
	// included. Default DefaultMaxMsgSize.
	MaxMsgSize int32
	// MaxAge removes messages older than this. 0 (the default) keeps the
	// log for ever, as an append-only ledger must; any other value throws
	// history away and is for throw-away deployments only.
	MaxAge time.Duration
}

// Validate fills in defaults and checks the options.
func (o *StreamOptions) Validate() error {
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.DuplicateWindow == 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.MaxMsgSize == 0 {
		o.MaxMsgSize = DefaultMaxMsgSize
	}
	switch {
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("%w: replicas %d, want 1..5", ErrStreamConfig, o.Replicas)
	case o.DuplicateWindow < 0:
		return fmt.Errorf("%w: negative duplicate window", ErrStreamConfig)
	case o.MaxMsgSize < ledger.MaxEnvelopeBytes:
		return fmt.Errorf("%w: max msg size %d is below the %d-byte envelope limit", ErrStreamConfig, o.MaxMsgSize, ledger.MaxEnvelopeBytes)
	case o.MaxAge < 0:
		return fmt.Errorf("%w: negative max age", ErrStreamConfig)
	case o.MaxAge > 0 && o.MaxAge < o.DuplicateWindow:
		return fmt.Errorf("%w: max age %v is shorter than the duplicate window %v", ErrStreamConfig, o.MaxAge, o.DuplicateWindow)
	}
	return nil
}

// StreamConfig returns the LEDGER stream configuration for o (which must
// have been validated). The choices, beyond contract §4:
//
//   - Retention limits with no limit on messages, bytes or messages per
//     subject, and Discard new: should an operator ever set a limit, a full
//     ledger refuses appends instead of silently dropping its oldest
//     history (Discard old would delete from the front of the log).
//   - DenyDelete and DenyPurge: message deletes and purges are refused by
//     the server, and JetStream never lets an update turn them off again.
//     Neither prevents deleting the whole stream: see [EnsureStream].
//   - AllowDirect off: message gets go through the stream leader, so a read
//     right after an acknowledged append sees it (direct gets may be
//     answered by a lagging replica). Reads in bulk use consumers anyway.
//   - No rollups, per-message TTLs, schedules or counters: each would let
//     a publisher remove or rewrite history, and TTLs and schedules cannot
//     be disabled once enabled.
//   - AllowAtomicPublish on: appends are written as atomic batches.
//   - S2 compression of a new stream: nats-server compresses each message
//     block when it is full, in the background (the write path and the
//     last block stay uncompressed; reads of older blocks decompress). The
//     peer harness's 100,000 envelopes take 22 MB instead of 84 MB, at no
//     ingest or end-to-end rate difference measurable on the 2-core
//     machine (docs/performance.md, Footprint). EnsureStream leaves the
//     compression of an existing stream as it is (an operator may set it).
func (o *StreamOptions) StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              subjects.StreamName,
		Description:       "Proposal ledger: append-only log of MEW lifecycle envelopes",
		Subjects:          []string{subjects.StreamSubjects},
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		Discard:           jetstream.DiscardNew,
		MaxAge:            o.MaxAge,
		MaxMsgSize:        o.MaxMsgSize,
		Storage:           jetstream.FileStorage,
		Replicas:          o.Replicas,
		Duplicates:        o.DuplicateWindow,
		DenyDelete:        true,
		DenyPurge:         true,
		AllowDirect:       false,
		// Atomic batches (nats-server ≥ 2.12): the group commit (contract
		// §4) writes many envelopes with one durable write.
		AllowAtomicPublish: true,
		Compression:        jetstream.S2Compression, // of full message blocks (see above)
	}
}

// EnsureStream creates the LEDGER stream, or checks an existing one and
// updates what may be updated, and returns it.
//
// An existing stream must bind exactly subjects.StreamSubjects with file
// storage and limits retention, have DenyDelete and DenyPurge set, not be
// sealed, a mirror or sourced, not transform subjects, and not allow
// rollups, message TTLs, schedules or counters; otherwise EnsureStream
// changes nothing and returns ErrStreamConfig naming the setting. The
// settings it manages are brought to o: replicas, duplicate window, max
// message size, max age, the message/byte limits (removed) and discard
// policy (new), allow-direct and the description. It leaves compression,
// placement, republish and metadata as the operator set them. It turns
// allow_atomic on (the group commit's atomic batches) for a stream made
// before it was used.
//
// Deleting the stream: DenyDelete and DenyPurge stop message deletes and
// purges, but JetStream always lets a client with access to
// $JS.API.STREAM.DELETE.LEDGER (or .UPDATE., which can set a max age)
// delete the stream or age its history out. Only NATS permissions prevent
// that: agents and auditors must not be allowed to publish to
// $JS.API.STREAM.{DELETE,UPDATE,PURGE,MSG.DELETE}.LEDGER (contract §10).
//
// EnsureStream is safe to call concurrently and from several processes:
// a creation that loses the race re-reads the winner's stream and checks
// it.
func EnsureStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (jetstream.Stream, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	want := o.StreamConfig()
	for attempt := 0; ; attempt++ {
		st, err := js.Stream(ctx, subjects.StreamName)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && attempt == 0 {
				continue // created concurrently: check the winner's
			}
			if err != nil {
				return nil, fmt.Errorf("ledger: create stream %s: %w", subjects.StreamName, err)
			}
			return st, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: stream %s: %w", subjects.StreamName, err)
		}
		have := st.CachedInfo().Config
		if err := checkCompatible(have); err != nil {
			return nil, err
		}
		upd, changed := managed(have, want)
		if !changed {
			return st, nil
		}
		st, err = js.UpdateStream(ctx, upd)
		if err != nil {
			return nil, fmt.Errorf("%w: update: %w", ErrStreamConfig, err)
		}
		return st, nil
	}
}

// checkCompatible reports the first setting of an existing stream that the
// ledger cannot use and will not change.
func checkCompatible(c jetstream.StreamConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrStreamConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case !slices.Equal(c.Subjects, []string{subjects.StreamSubjects}):
		return bad("binds subjects %q, want exactly [%q]", c.Subjects, subjects.StreamSubjects)
	case c.Storage != jetstream.FileStorage:
		return bad("has %s storage, want file", c.Storage)
	case c.Retention != jetstream.LimitsPolicy:
		return bad("has %s retention, want limits", c.Retention)
	case !c.DenyDelete:
		return bad("allows message deletes (deny_delete is off)")
	case !c.DenyPurge:
		return bad("allows purges (deny_purge is off)")
	case c.Sealed:
		return bad("is sealed")
	case c.Mirror != nil:
		return bad("is a mirror")
	case len(c.Sources) > 0:
		return bad("has sources")
	case c.SubjectTransform != nil:
		return bad("transforms subjects")
	case c.NoAck:
		return bad("does not acknowledge publishes (no_ack)")
	case c.AllowRollup:
		return bad("allows rollups")
	case c.AllowMsgTTL:
		return bad("allows per-message TTLs")
	case c.AllowMsgSchedules:
		return bad("allows message schedules")
	case c.AllowMsgCounter:
		return bad("is a counter stream")
	case c.SubjectDeleteMarkerTTL != 0:
		return bad("has subject delete markers")
	}
	return nil
}

// managed returns have with the settings EnsureStream manages set to
// want's, and whether anything changed.
func managed(have, want jetstream.StreamConfig) (jetstream.StreamConfig, bool) {
	upd := have
	upd.Description = want.Description
	upd.Replicas = want.Replicas
	upd.Duplicates = want.Duplicates
	upd.MaxMsgSize = want.MaxMsgSize
	upd.MaxAge = want.MaxAge
	upd.MaxMsgs, upd.MaxBytes, upd.MaxMsgsPerSubject = want.MaxMsgs, want.MaxBytes, want.MaxMsgsPerSubject
	upd.Discard = want.Discard
	upd.DiscardNewPerSubject = false
	upd.AllowDirect = want.AllowDirect
	upd.AllowAtomicPublish = want.AllowAtomicPublish
	// What differs is what managedDiff lists: one list of the managed
	// settings to compare, beside the one above that sets them.
	return upd, len(managedDiff(have, want)) > 0
}
