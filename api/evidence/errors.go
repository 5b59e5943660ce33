package evidence

import "errors"

// The package's error kinds. Every error it returns wraps one of them.
var (
	// ErrMalformed: a checkpoint, bundle, proof or tile path does not
	// parse (bad syntax, a missing or extra field, an impossible size).
	ErrMalformed = errors.New("evidence: malformed")
	// ErrLeafEncoding: leaf bytes are not a canonical encoding of a
	// [Leaf] (unknown version, truncated, trailing bytes, unsorted or
	// repeated headers), or a Leaf cannot be encoded.
	ErrLeafEncoding = errors.New("evidence: bad leaf encoding")
	// ErrKey: a signer or verifier key does not parse.
	ErrKey = errors.New("evidence: bad key")
	// ErrSignature: a checkpoint carries no valid signature of the
	// verifier key (unsigned, signed by another key, or a signature that
	// does not verify: the text was changed after signing).
	ErrSignature = errors.New("evidence: signature not verified")
	// ErrOrigin: a checkpoint names another log than the verifier key's,
	// or two checkpoints name different logs.
	ErrOrigin = errors.New("evidence: wrong origin")
	// ErrInclusion: an inclusion proof does not lead from the leaf hash
	// to the checkpoint's root hash: the leaf, its index or the proof is
	// not the one the signed tree holds.
	ErrInclusion = errors.New("evidence: inclusion proof failed")
	// ErrMismatch: an event's stated fields (sequence, time, subject,
	// headers, bytes, leaf hash) differ from the leaf bytes that are
	// proven.
	ErrMismatch = errors.New("evidence: event does not match its leaf")
	// ErrForked: a newer checkpoint's tree does not extend an older one's
	// (the consistency proof fails): the log was rewritten or replaced
	// and the two trees share no history from some leaf on.
	ErrForked = errors.New("evidence: log forked")
	// ErrRewritten: two checkpoints of the same tree size have different
	// root hashes. Errors of this kind also match ErrForked.
	ErrRewritten = errors.New("evidence: log rewritten")
	// ErrShrank: a newer checkpoint's tree is smaller than one accepted
	// before (leaves were removed).
	ErrShrank = errors.New("evidence: log shrank")
)
