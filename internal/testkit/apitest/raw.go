package apitest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mewledger/ledger/api"
)

// The tests' raw HTTP helpers, for what is checked on the wire (status
// codes, headers, bodies as sent) rather than through Client.

// GetRaw GETs url and returns the status code, the headers and the body;
// a request that gets no answer fails t.
func GetRaw(t testing.TB, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// GetJSON GETs url, decodes the body into v (when not nil and it is
// JSON) and returns the status code, the headers and the body.
func GetJSON(t testing.TB, url string, v any) (int, http.Header, string) {
	t.Helper()
	code, hdr, body := GetRaw(t, url)
	if v != nil {
		_ = json.Unmarshal(body, v)
	}
	return code, hdr, string(body)
}

// PostEnvelope appends one envelope (POST base/v1/events) and returns its
// sequence; anything but 202 with a sequence fails t.
func PostEnvelope(t testing.TB, base, env string) uint64 {
	t.Helper()
	resp, err := http.Post(base+"/v1/events", "application/json", strings.NewReader(env))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %d %v", env, resp.StatusCode, err)
	}
	return r.Seq
}

// StatusOf returns GET base/v1/status; anything but 200 fails t.
func StatusOf(t testing.TB, base string) api.Status {
	t.Helper()
	var st api.Status
	if code, _, body := GetJSON(t, base+"/v1/status", &st); code != http.StatusOK {
		t.Fatalf("GET /v1/status: %d %s", code, body)
	}
	return st
}
