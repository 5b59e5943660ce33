package fold

import (
	"time"

	"github.com/mewledger/ledger/api"

	"github.com/mewledger/ledger/ledger"
)

// EventStatus is where an event stands in the event-id index.
type EventStatus string

// Event statuses.
const (
	EventApplied EventStatus = "applied" // applied to at least one proposal
	EventOrphan  EventStatus = "orphan"  // waiting for its target
	EventIgnored EventStatus = "ignored" // valid, not lifecycle
	EventInvalid EventStatus = "invalid" // decoded, but refused by the fold
	// EventRecorded: folded outside any proposal (a ledger/gap): nothing
	// can be applied to it, and a note naming it is ignored.
	EventRecorded EventStatus = "recorded"
)

// EventRef is the event-id index entry of one envelope id in a space: what
// the fold needs to dedup for ever and to follow chains (contract §5.7).
type EventRef struct {
	Seq    uint64      `json:"seq"`
	Type   ledger.Type `json:"type"`
	Digest string      `json:"digest"`
	From   string      `json:"from"`
	Status EventStatus `json:"status"`
	// Proposals are the proposals the event has been applied to, in order.
	Proposals []string `json:"proposals,omitempty"`
}

// Orphan is one event waiting for the id it names (Target); its orphan
// history entry is filed under Target. The event's bytes are parked once,
// by sequence (ParkedEvent), however many ids it waits for, so that one
// message naming many missing proposals costs its size once, not once per
// name.
type Orphan struct {
	Seq    uint64 `json:"seq"`
	Target string `json:"target"`
}

// ParkedEvent is a stored message held for its orphans, so that it can be
// folded later exactly as if it arrived then. Refs counts the waiting-list
// entries that still need it; at zero it is deleted.
type ParkedEvent struct {
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"`
	Raw     []byte    `json:"raw"`
	Refs    int       `json:"refs"`
	// Flags are the event's fold flags that its bytes do not carry (id
	// reused, Nats-Msg-Id clash), so that it is folded on release as it
	// would have been on arrival.
	Flags EventFlags `json:"flags,omitempty"`
}

// State is what the fold reads and writes: a transactional view of the
// projection. Implementations: [MemState] (the fold's in-memory reference,
// which the tests and the fold scripts use) and the Pebble store's batch
// (package projections), which also implements the optional [Prefetcher]
// and [StatsMutator]. Reads must return the latest value written through
// the same State (read-your-writes); getters return nil (and
// no error) for absent records, and callers may mutate what they get only
// after cloning (the fold always Puts a modified copy). Errors are storage
// failures only; the fold aborts the batch on any error.
type State interface {
	Proposal(space, id string) (*api.Proposal, error)
	PutProposal(p *api.Proposal) error
	EventRef(space, id string) (*EventRef, error)
	PutEventRef(space, id string, r *EventRef) error
	// Orphans returns the events waiting for target, in sequence order.
	Orphans(space, target string) ([]Orphan, error)
	// PutOrphans replaces the waiting list of target; an empty list deletes it.
	PutOrphans(space, target string, o []Orphan) error
	// PutHistory files entry h under key (a proposal id, or the id an
	// orphan or unattributable event was filed under).
	// Parked returns the event parked at seq, nil if none; PutParked
	// stores it, or deletes it when p is nil.
	Parked(space string, seq uint64) (*ParkedEvent, error)
	PutParked(space string, seq uint64, p *ParkedEvent) error
	// Filed returns how many history entries (not orphans) were filed
	// under key while it named no proposal; PutFiled sets it (0 deletes).
	Filed(space, key string) (int, error)
	PutFiled(space, key string, n int) error
	PutHistory(space, key string, h *api.HistoryEntry) error
	DeleteHistory(space, key string, seq uint64) error
	Stats(space string) (*api.Stats, error)
	PutStats(space string, s *api.Stats) error
	// PutGap records a recording gap of a bridge under (space, g.Seq),
	// replacing the one there; Gap returns it (nil if none).
	PutGap(space string, g *api.Gap) error
	Gap(space string, seq uint64) (*api.Gap, error)
	// RecorderRuns returns the closed runs of a recorder (key
	// BridgeKey(bridge, mew space)) in the order closed; PutRecorderRuns
	// replaces them (contract §14 "Several recorders", holes.go).
	RecorderRuns(space, key string) ([]api.RecorderRun, error)
	PutRecorderRuns(space, key string, runs []api.RecorderRun) error
	// BridgeSession returns what the log says of one bridge (key
	// BridgeKey(bridge, mew space)), nil if nothing; PutBridgeSession
	// stores it.
	BridgeSession(space, key string) (*api.BridgeSession, error)
	PutBridgeSession(space, key string, s *api.BridgeSession) error
	// Version returns the sequence of an earlier event of the space that
	// had id and digest and was since superseded in the event index by a
	// different event reusing its id (contract §5.2), 0 when none; PutVersion
	// records one. They keep a retry of a superseded event a duplicate.
	Version(space, id, digest string) (uint64, error)
	PutVersion(space, id, digest string, seq uint64) error
}

// EventRecorder is an optional interface of a [State] that keeps a record
// of every arriving event by its sequence (the Pebble store's event index,
// contract §7 GET /v1/events). Apply calls RecordEvent once per arriving event,
// before folding it (released orphans are not arrivals), with the event
// decoded (see [Event.Decoded]); the history entries the fold then writes
// for that sequence, now or when it is released from orphan, complete the
// record. RecordEvent must change nothing the fold reads. Its errors are
// the State's storage errors.
type EventRecorder interface {
	RecordEvent(ev *Event) error
}
