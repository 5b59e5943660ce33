package evidence

// The JSON answers of the ledger's verifiable-log routes (contract §16) that
// are not a Bundle, shared by the server and its clients.

// ConsistencyProof is the answer of GET /v1/proof/consistency?from=N&to=M:
// the RFC 6962 consistency proof (tlog.ProveTree) from the tree of From
// leaves to the tree of To, standard base64 hashes (ParseHashes). Check it
// with VerifyConsistency between two checkpoints of those sizes.
type ConsistencyProof struct {
	From  int64    `json:"from"`
	To    int64    `json:"to"`
	Proof []string `json:"proof"`
}

// CheckpointInfo is one checkpoint of GET /v1/checkpoints: its tree size,
// root hash (standard base64) and signed note (verify it with
// OpenCheckpoint; Size and RootHash are only a convenience).
type CheckpointInfo struct {
	Size     int64  `json:"size"`
	RootHash string `json:"root_hash"`
	Note     string `json:"note"`
}

// CheckpointList is the answer of GET /v1/checkpoints?from=N&limit=L:
// checkpoints of tree sizes ≥ from, smallest first; NextFrom, when set, is
// the from of the next page.
type CheckpointList struct {
	Checkpoints []CheckpointInfo `json:"checkpoints"`
	NextFrom    *int64           `json:"next_from,omitempty"`
}

// InclusionProof is the answer of GET /v1/proof/inclusion?seq=N[&size=M]:
// the RFC 6962 inclusion proof of the leaf of stream sequence Seq (index
// Seq-1, hash LeafHash) in the tree the signed Checkpoint names (of
// TreeSize leaves). Check it with VerifyInclusion after OpenCheckpoint;
// a client holding the message recomputes LeafHash from its Leaf.
type InclusionProof struct {
	Seq        uint64   `json:"seq"`
	LeafIndex  int64    `json:"leaf_index"`
	TreeSize   int64    `json:"tree_size"`
	LeafHash   string   `json:"leaf_hash"`
	Proof      []string `json:"proof"`
	Checkpoint string   `json:"checkpoint"`
}
