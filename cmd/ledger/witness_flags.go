package main

import (
	"os"
	"strings"

	"github.com/mewledger/ledger/api/evidence"
)

// witnessFlags are a verifier's --witness-key (repeatable; a key or a file
// holding one, LEDGER_WITNESS_KEYS comma-separated) and --witness-quorum.
type witnessFlags struct {
	keys   []string
	quorum int
}

// register adds the flags; env says whether --witness-key reads
// LEDGER_WITNESS_KEYS (the online verifier, get --verify).
func (w *witnessFlags) register(f *flags, env bool) {
	f.listEnv(&w.keys, "witness-key", "KEY", "require the checkpoint to be cosigned by this witness (its cosignature/v1 verifier key, or a file holding it); repeat for each witness", env, "LEDGER_WITNESS_KEYS")
	f.integer(&w.quorum, "witness-quorum", "N", 0, "with --witness-key: how many of the witnesses must have cosigned (default: all)", false)
}

// witnesses parses the flags (no keys: nothing required).
func (w *witnessFlags) witnesses() (evidence.Witnesses, error) {
	var keys []string
	for _, k := range w.keys {
		if _, err := evidence.NewWitnessVerifier(k); err != nil {
			b, rerr := os.ReadFile(k)
			if rerr != nil {
				return evidence.Witnesses{}, usageError("--witness-key %q is neither a witness verifier key nor a readable file", k)
			}
			k = strings.TrimSpace(string(b))
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 && w.quorum != 0 {
		return evidence.Witnesses{}, usageError("--witness-quorum goes with --witness-key")
	}
	ws, err := evidence.ParseWitnesses(keys, w.quorum)
	if err != nil {
		return evidence.Witnesses{}, usageError("--witness-key/--witness-quorum: %v", err)
	}
	return ws, nil
}
