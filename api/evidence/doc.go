// Package evidence is the ledger's verifiable-log core (contract §16): the
// canonical encoding of one stored message as a Merkle-tree leaf, signed
// checkpoints in the C2SP tlog-checkpoint format, inclusion and
// consistency checks, the C2SP tlog-tiles paths, and the self-contained
// evidence bundle with its verifier.
//
// It is pure: it links only the standard library and
// golang.org/x/mod/sumdb/{tlog,note}, does no I/O of its own and keeps no
// state, so the server (which builds the tree and signs checkpoints), the
// Go client (which verifies what it reads) and `ledger verify --bundle`
// (which checks a bundle with no server) share one implementation. Every
// function is safe for concurrent use.
//
// # The tree
//
// The stored messages of the LEDGER stream, in stream order, are the
// leaves of an RFC 6962 Merkle tree: the message at stream sequence s is
// leaf s-1, and its leaf hash is tlog.RecordHash(leaf bytes), that is
// SHA-256(0x00 ‖ leaf bytes). Interior nodes are SHA-256(0x01 ‖ left ‖
// right). The leaf bytes are [Leaf.MarshalBinary]'s encoding, documented
// on [Leaf] byte by byte.
//
// # Checkpoints
//
// A checkpoint is a C2SP signed note whose text is
//
//	<origin>\n<tree size, decimal>\n<root hash, standard base64>\n
//
// signed with Ed25519 by a key whose name is the origin
// ([GenerateKey]). [SignCheckpoint] makes one, [OpenCheckpoint] checks one
// against a verifier key.
//
// # Errors
//
// Every failure wraps one of the package's sentinels (ErrMalformed,
// ErrLeafEncoding, ErrSignature, ErrKey, ErrOrigin, ErrInclusion,
// ErrMismatch, ErrForked, ErrRewritten, ErrShrank), matched with
// errors.Is; the message adds what exactly failed and the sequence or
// tree sizes that matter.
package evidence
