package api

// Gaps is the body of GET /v1/gaps: the recording gaps of a space's
// bridges, oldest first (contract §7, §14). NextCursor is "" on the last page.
type Gaps struct {
	Gaps       []Gap  `json:"gaps"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Bridges is the body of GET /v1/bridges: what the ledger knows of each
// bridge recording into a space (contract §14).
type Bridges struct {
	Bridges []BridgeSession `json:"bridges"`
}
