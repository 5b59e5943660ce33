package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/mewledger/ledger/api"
)

// TestStarIsNotASpace (issue 36): "*" means every space on the event
// routes and nothing else: an append into "*" (single, NDJSON, a gap) and
// a read of space "*" on the per-space routes are 400 naming the field
// space, and nothing is stored.
func TestStarIsNotASpace(t *testing.T) {
	l := start(t)
	l.wantError(http.MethodPost, "/v1/events?space=*", "application/json", []byte(goldenProposal), http.StatusBadRequest, api.CodeBadQuery, "space")
	l.wantError(http.MethodPost, "/v1/gaps?space=*", "application/json", []byte(`{"bridge":"b","disconnected_at":"2026-01-01T00:00:00Z","reconnected_at":"2026-01-01T00:00:01Z"}`), http.StatusBadRequest, api.CodeBadQuery, "space")
	l.wantError(http.MethodPost, "/v1/events?space=*", "application/x-ndjson", []byte(goldenProposal+"\n"), http.StatusBadRequest, api.CodeBadQuery, "space")
	for _, read := range []string{"/v1/proposals", "/v1/stats", "/v1/gaps", "/v1/proposals/env-req-1"} {
		l.wantError(http.MethodGet, read+"?space=*", "", nil, http.StatusBadRequest, api.CodeBadQuery, "space")
	}
	var st struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	l.get("/v1/status", http.StatusOK, &st)
	if st.StreamSeq != 0 {
		t.Fatalf("stream_seq %d after refusals only", st.StreamSeq)
	}
}

// TestEventsAsOfBeyondLog (issue 36): GET /v1/events with an as-of point
// past the end of the log (a sequence after the last, a time in the
// future) is 400 beyond_log, as on every other as-of route.
func TestEventsAsOfBeyondLog(t *testing.T) {
	l := start(t)
	l.post(goldenProposal)
	l.wantError(http.MethodGet, "/v1/events?as_of_seq=1000", "", nil, http.StatusBadRequest, api.CodeBeyondLog, "as_of_seq")
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	l.wantError(http.MethodGet, "/v1/events?as_of="+future, "", nil, http.StatusBadRequest, api.CodeBeyondLog, "as_of")
	l.get("/v1/events?as_of_seq=1&min_seq=1", http.StatusOK, nil)
}
