package projections

// The records live in package model (no Pebble, no NATS); these aliases keep
// their projections names.

import "github.com/mewledger/ledger/projections/model"

type (
	DiffKind          = model.DiffKind
	Difference        = model.Difference
	KeyInfo           = model.KeyInfo
	Change            = model.Change
	Approval          = model.Approval
	Effect            = model.Effect
	ExclusiveWindow   = model.ExclusiveWindow
	FormNote          = model.FormNote
	Fulfillment       = model.Fulfillment
	Gap               = model.Gap
	HistoryEntry      = model.HistoryEntry
	Kernel            = model.Kernel
	ParticipantStatus = model.ParticipantStatus
	Proposal          = model.Proposal
	ProposalState     = model.ProposalState
	Rejection         = model.Rejection
	Response          = model.Response
	Stats             = model.Stats
	Target            = model.Target
	Withdrawal        = model.Withdrawal
)

const (
	MissingInA                     = model.MissingInA
	MissingInB                     = model.MissingInB
	ValuesDiffer                   = model.ValuesDiffer
	TableCheckpoint                = model.TableCheckpoint
	TableSpace                     = model.TableSpace
	TableProposal                  = model.TableProposal
	TableHistory                   = model.TableHistory
	TableEventRef                  = model.TableEventRef
	TableOrphans                   = model.TableOrphans
	TableParked                    = model.TableParked
	TableFiled                     = model.TableFiled
	TableGap                       = model.TableGap
	TableVersion                   = model.TableVersion
	TableStats                     = model.TableStats
	TableIndex                     = model.TableIndex
	TableDeadline                  = model.TableDeadline
	TableChange                    = model.TableChange
	TableUnknown                   = model.TableUnknown
	StatePending                   = model.StatePending
	StateFulfilled                 = model.StateFulfilled
	StateWithdrawn                 = model.StateWithdrawn
	StateRejected                  = model.StateRejected
	StateExpired                   = model.StateExpired
	EffectApplied                  = model.EffectApplied
	EffectRecorded                 = model.EffectRecorded
	EffectDuplicate                = model.EffectDuplicate
	EffectLate                     = model.EffectLate
	EffectUnauthorized             = model.EffectUnauthorized
	EffectInvalid                  = model.EffectInvalid
	EffectOrphan                   = model.EffectOrphan
	EffectIgnored                  = model.EffectIgnored
	AnomalyIDConflict              = model.AnomalyIDConflict
	AnomalyUnauthorizedWithdraw    = model.AnomalyUnauthorizedWithdraw
	AnomalyMultipleFulfillments    = model.AnomalyMultipleFulfillments
	AnomalyFulfilledAfterWithdrawn = model.AnomalyFulfilledAfterWithdrawn
	AnomalyFulfilledAfterRejected  = model.AnomalyFulfilledAfterRejected
	AnomalyFulfilledAfterExpired   = model.AnomalyFulfilledAfterExpired
	AnomalyFulfillmentMismatch     = model.AnomalyFulfillmentMismatch
	AnomalyTargetMismatch          = model.AnomalyTargetMismatch
	AnomalySelfFulfilled           = model.AnomalySelfFulfilled
	AnomalyUnapprovedFulfillment   = model.AnomalyUnapprovedFulfillment
	AnomalyFulfilledBeforeWindow   = model.AnomalyFulfilledBeforeWindow
	AnomalyIDReused                = model.AnomalyIDReused
	AnomalyMsgIDClash              = model.AnomalyMsgIDClash
	AnomalyExclusiveViolation      = model.AnomalyExclusiveViolation
	KernelFormProposal             = model.KernelFormProposal
	KernelFormRequest              = model.KernelFormRequest
)

var (
	AnomalyNames = model.AnomalyNames
	States       = model.States
	NewStats     = model.NewStats
)
