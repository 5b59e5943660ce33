package projections

// AnomalyNames lists every anomaly the fold raises (the Anomaly*
// constants), in the order of SPEC §5 and §12. The API's anomaly filter
// and the statistics accept exactly these; a test checks that the list
// names every constant, so a new anomaly cannot be left out.
var AnomalyNames = []string{
	AnomalyIDConflict,
	AnomalyUnauthorizedWithdraw,
	AnomalyMultipleFulfillments,
	AnomalyFulfilledAfterWithdrawn,
	AnomalyFulfilledAfterRejected,
	AnomalyFulfilledAfterExpired,
	AnomalyFulfillmentMismatch,
	AnomalyTargetMismatch,
	AnomalySelfFulfilled,
	AnomalyUnapprovedFulfillment,
	AnomalyFulfilledBeforeWindow,
	AnomalyIDReused,
	AnomalyMsgIDClash,
	AnomalyExclusiveViolation,
}
