package projections

// The fold lives in package fold (no Pebble); these aliases keep its
// projections names for the packages that use them (internal/api,
// internal/app, cmd/ledger, the tests).

import "github.com/mewledger/ledger/projections/fold"

type (
	Event        = fold.Event
	EventFlags   = fold.EventFlags
	EventRef     = fold.EventRef
	EventStatus  = fold.EventStatus
	Folder       = fold.Folder
	MemState     = fold.MemState
	Orphan       = fold.Orphan
	Outcome      = fold.Outcome
	ParkedEvent  = fold.ParkedEvent
	State        = fold.State
	Prefetcher   = fold.Prefetcher
	StatsMutator = fold.StatsMutator
)

const (
	HeaderMsgIDClash    = fold.HeaderMsgIDClash
	FlagIDReused        = fold.FlagIDReused
	FlagMsgIDClash      = fold.FlagMsgIDClash
	CodeBadSubject      = fold.CodeBadSubject
	CodeSubjectMismatch = fold.CodeSubjectMismatch
	CodeSpoofedSender   = fold.CodeSpoofedSender
	CodeIDConflict      = fold.CodeIDConflict
	CodeNotAProposal    = fold.CodeNotAProposal
	CodeBadExpiry       = fold.CodeBadExpiry
	EventApplied        = fold.EventApplied
	EventOrphan         = fold.EventOrphan
	EventIgnored        = fold.EventIgnored
	EventInvalid        = fold.EventInvalid
	EventRecorded       = fold.EventRecorded
)

var (
	NewFolder    = fold.NewFolder
	NewMemState  = fold.NewMemState
	ReasonBucket = fold.ReasonBucket
)
