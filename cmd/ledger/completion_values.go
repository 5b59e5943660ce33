package main

import (
	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/ledger"
)

// fixedValues are the value sets of flags whose placeholder does not list
// them (--effect EFFECT): the scripts complete these words, taken from the
// code's own lists.
func fixedValues() map[string][]string {
	effects := []api.Effect{api.EffectApplied, api.EffectRecorded, api.EffectDuplicate, api.EffectLate,
		api.EffectUnauthorized, api.EffectInvalid, api.EffectOrphan, api.EffectIgnored}
	types := []ledger.Type{ledger.TypeProposal, ledger.TypeWithdraw, ledger.TypeReject, ledger.TypeFulfil, ledger.TypeResponse,
		ledger.TypeNote, ledger.TypeApprove, ledger.TypeExpire, ledger.TypeGap, ledger.TypeIgnored}
	return map[string][]string{
		"effect":    strs(effects),
		"type":      strs(types),
		"anomaly":   append([]string(nil), api.AnomalyNames...),
		"log-level": {"trace", "debug", "info", "warn", "error"},
	}
}

func strs[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}
