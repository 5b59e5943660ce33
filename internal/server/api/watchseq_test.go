package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
)

// TestWatchSequencePastTheEnd (issue 29 item 8): since_seq or
// Last-Event-ID past the end of the log is refused naming the field (a
// sequence of another ledger, or of a reset log, would wait silently), a
// huge Last-Event-ID is not echoed whole, and /v1/changes and /v1/watch
// take min_seq like every read.
func TestWatchSequencePastTheEnd(t *testing.T) {
	l := start(t)
	r := l.post(goldenProposal)

	l.wantError(http.MethodGet, "/v1/changes?since_seq=99", "", nil, http.StatusBadRequest, api.CodeBadQuery, "since_seq")
	l.wantError(http.MethodGet, "/v1/watch?since_seq=99", "", nil, http.StatusBadRequest, api.CodeBadQuery, "since_seq")
	// The end itself is fine: nothing after it yet.
	var page struct {
		Changes []any  `json:"changes"`
		Through uint64 `json:"through"`
	}
	l.get(fmt.Sprintf("/v1/changes?since_seq=%d&min_seq=%d", r.Seq, r.Seq), http.StatusOK, &page)
	if len(page.Changes) != 0 {
		t.Fatalf("changes after the end: %+v", page)
	}
	l.get(fmt.Sprintf("/v1/changes?min_seq=%d", r.Seq), http.StatusOK, &page)
	if len(page.Changes) != 1 {
		t.Fatalf("changes after min_seq: %+v", page)
	}
	// min_seq not reached: 503 not_caught_up, on both.
	l.wantError(http.MethodGet, "/v1/changes?min_seq=1000", "", nil, http.StatusServiceUnavailable, api.CodeNotCaughtUp, "min_seq")
	l.wantError(http.MethodGet, "/v1/watch?min_seq=1000", "", nil, http.StatusServiceUnavailable, api.CodeNotCaughtUp, "min_seq")

	for _, id := range []string{"99", strings.Repeat("7", 100_000)} {
		req, _ := http.NewRequest(http.MethodGet, l.url+"/v1/watch", nil)
		req.Header.Set("Last-Event-ID", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = fmt.Fprint(&body, readAll(t, resp))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), `"field":"Last-Event-ID"`) {
			t.Fatalf("Last-Event-ID of %d bytes: %d %s", len(id), resp.StatusCode, body.String())
		}
		if body.Len() > 1000 {
			t.Fatalf("Last-Event-ID of %d bytes: a %d-byte answer echoes it", len(id), body.Len())
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestGapTimeOutOfRange (issue 29 item 8): POST /v1/gaps with a
// disconnected_at past 2262 (where the gap id's Unix nanoseconds
// overflow, and two gaps could share one id) is refused naming the field.
func TestGapTimeOutOfRange(t *testing.T) {
	l := start(t)
	for _, at := range []string{"2263-01-01T00:00:00Z", "2400-06-01T00:00:00Z"} {
		l.wantError(http.MethodPost, "/v1/gaps", "application/json", []byte(`{"bridge":"rec","disconnected_at":"`+at+`"}`),
			http.StatusBadRequest, "bad_value", "disconnected_at")
	}
}
