package fold

import (
	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// Sealed marks (contract §14, "Several recorders": only a recorder can
// speak for itself). The fold cannot know who published a message: a
// NATS client allowed to publish on the stream's event subjects may set
// any header, and the stream stores it as given. So a mark moves a
// recorder's record (its session, last envelope, runs, the end of its
// gap windows) only when it proves it came through the ledger's own
// append path, after the recorder checks of HTTP and the submit service:
//
//   - its seal (ledger.HeaderBridgeSeal) verifies under the fold's
//     MarkKeys, which binds the mark to the message's subject and bytes;
//   - and the message is not a repeat of an envelope stored before
//     (effect duplicate): the ledger's append path never stores one
//     twice, so a sealed message published again as is (after the
//     stream's duplicate window) is a replay, not a recording.
//
// Any other mark is ignored for the recorders and counted in the
// space's Stats.MarksIgnored; the envelope itself folds as always.

// bridgeMarked honours ev's mark when its seal verifies under keys and ev
// is not a repeat; else counts it.
func (a *applier) bridgeMarked(ev Event, keys *ledger.MarkKeys) error {
	pr := ev.pre
	if pr.serr != nil {
		return nil // filed under no space's subject: no recorder's
	}
	if keys.Verify(ev.Subject, ev.Bridge, ev.Raw, ev.BridgeSeal) && !a.repeated(ev.Seq) {
		return a.bridgeStored(ev)
	}
	s, err := a.statsFor(pr.subj.Space)
	if err != nil {
		return err
	}
	s.MarksIgnored++
	return nil
}

// repeated says whether the event at seq folded as a duplicate of an
// earlier stored envelope.
func (a *applier) repeated(seq uint64) bool {
	for _, o := range a.out {
		if o.Seq == seq && o.Effect == api.EffectDuplicate {
			return true
		}
	}
	return false
}
