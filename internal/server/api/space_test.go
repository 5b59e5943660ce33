package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
)

// TestSpaceNeverGuessed: a ?space= that does not parse — a ';' separator
// (which url.ParseQuery drops, leaving no space at all), a bad %-escape,
// an empty value, a value over the limit — is a 400 naming the field
// "space" on every route that takes one, for single envelopes and NDJSON
// bodies alike, and nothing is stored (contract §10, issue 29 item 6).
func TestSpaceNeverGuessed(t *testing.T) {
	l := start(t)
	bad := []string{"ops;research", "ops%zz", "", strings.Repeat("s", 2000)}
	for _, read := range []string{"/v1/proposals", "/v1/stats", "/v1/changes", "/v1/gaps"} {
		l.wantError(http.MethodGet, read+"?space="+bad[3], "", nil, http.StatusBadRequest, api.CodeBadQuery, "space")
	}
	for _, sp := range bad {
		q := "?space=" + sp
		if len(sp) > 1000 { // the appender's refusal
			l.wantError(http.MethodPost, "/v1/events"+q, "application/json", []byte(goldenProposal), http.StatusBadRequest, "too_long", "space")
			continue
		}
		l.wantError(http.MethodPost, "/v1/events"+q, "application/json", []byte(goldenProposal), http.StatusBadRequest, api.CodeBadQuery, "space")
		l.wantError(http.MethodPost, "/v1/events"+q, "application/x-ndjson", []byte(goldenProposal+"\n"+goldenFulfil+"\n"), http.StatusBadRequest, api.CodeBadQuery, "space")
		l.wantError(http.MethodPost, "/v1/gaps"+q, "application/json", []byte(`{"bridge":"b","disconnected_at":"2026-01-01T00:00:00Z","reconnected_at":"2026-01-01T00:00:01Z"}`), http.StatusBadRequest, api.CodeBadQuery, "space")
		for _, read := range []string{"/v1/proposals", "/v1/stats", "/v1/changes", "/v1/watch", "/v1/gaps", "/v1/proposals/env-req-1"} {
			l.wantError(http.MethodGet, read+q, "", nil, http.StatusBadRequest, api.CodeBadQuery, "space")
		}
	}
	// A ';' anywhere in the query names the parameter it is in.
	l.wantError(http.MethodPost, "/v1/events?kernel=0;space=x", "application/json", []byte(goldenProposal), http.StatusBadRequest, api.CodeBadQuery, "kernel")
	var st struct {
		StreamSeq uint64 `json:"stream_seq"`
	}
	l.get("/v1/status", http.StatusOK, &st)
	if st.StreamSeq != 0 {
		t.Fatalf("stream_seq %d after refusals only", st.StreamSeq)
	}
	// The same envelope with a good space is stored in that space.
	l.postTo("ops", goldenProposal)
	var p struct {
		Space string `json:"space"`
	}
	l.get("/v1/proposals/env-req-1?space=ops&min_seq=1", http.StatusOK, &p)
	if p.Space != "ops" {
		t.Fatalf("stored in %q", p.Space)
	}
}
