package api

import "time"

// WitnessStatus is one witness the ledger asks to cosign its checkpoints
// (contract §16), as GET /v1/status shows it.
type WitnessStatus struct {
	// Name is the witness's key name; URL where it is asked; VKey its
	// verifier key.
	Name string `json:"name"`
	URL  string `json:"url"`
	VKey string `json:"vkey"`
	// CosignedSize is the tree size of the last checkpoint it cosigned
	// since the ledger started (-1: none yet), at CosignedAt.
	CosignedSize int64      `json:"cosigned_size"`
	CosignedAt   *time.Time `json:"cosigned_at,omitempty"`
	// LastError is why the last request failed ("" when it succeeded),
	// at LastErrorAt; Failures counts failed requests in a row.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	Failures    int        `json:"failures,omitempty"`
	// Alarm says the witness refused this ledger's history (it answered a
	// consistency proof 422): someone was shown another history. The
	// ledger is then not ready.
	Alarm string `json:"alarm,omitempty"`
}

// Witnessing is the witnesses part of GET /v1/status.
type Witnessing struct {
	// Quorum is how many witnesses must cosign a checkpoint for
	// GET /v1/checkpoint to serve it.
	Quorum int `json:"quorum"`
	// WitnessedSize is the tree size of the latest checkpoint holding the
	// quorum (-1: none yet); SignedSize the latest signed one's.
	WitnessedSize int64           `json:"witnessed_size"`
	SignedSize    int64           `json:"signed_size"`
	Witnesses     []WitnessStatus `json:"witnesses"`
}
