package client

import (
	"fmt"

	"github.com/mewledger/ledger/api/evidence"
)

// WithWitnesses makes VerifiedGet also require the proof's checkpoint to
// be cosigned by quorum of the witnesses whose verifier keys are given
// (C2SP tlog-cosignature keys, as litewitness prints them; quorum 0: all
// of them). A checkpoint without the quorum is refused with an error
// wrapping evidence.ErrNoQuorum, and is not kept. Use it with
// WithVerifier. Keys that do not parse, or a quorum over their number,
// are an error wrapping ErrOptions and evidence.ErrKey.
func WithWitnesses(keys []string, quorum int) Option {
	return func(o *Options) error {
		w, err := evidence.ParseWitnesses(keys, quorum)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrOptions, err)
		}
		o.witnesses = w
		return nil
	}
}

// WithWitnessVerifiers is WithWitnesses with keys already parsed
// (evidence.ParseWitnesses).
func WithWitnessVerifiers(w evidence.Witnesses) Option {
	return func(o *Options) error {
		o.witnesses = w
		return nil
	}
}
