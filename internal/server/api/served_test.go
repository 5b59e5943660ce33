package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// plainReader hides the store's GetRaw and ListRaw: the API takes the
// decoding path.
type plainReader struct{ Reader }

// servedAPIs folds workloads and the hostile corpus into a store and
// returns an API that serves its stored bytes and one that takes the
// decoding path.
func servedAPIs(tb testing.TB) (fast, slow *API) {
	tb.Helper()
	store, err := projections.OpenStore(projections.StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close() })
	var raws [][]byte
	g := workload.New(workload.Options{Seed: 5, PadTo: 300, Disorder: 10, Foreign: 10,
		Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 15, Response: 10, Chat: 10}})
	raws = append(raws, g.Batch(1500)...)
	cases, err := badinput.LoadDefault()
	if err != nil {
		tb.Fatal(err)
	}
	for _, c := range cases {
		if len(c.Data) < 64<<10 {
			raws = append(raws, c.Data)
		}
	}
	f := fold.NewFolder()
	b := store.NewBatch()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, raw := range raws {
		subj := "ledger.default.x.proposal.y"
		if d, err := ledger.Decode(raw, ledger.DecodeOptions{Now: t0}); err == nil && d.Type.Valid() {
			subj = subjects.Event{Space: "default", Key: d.Key, Type: string(d.Type), Sender: d.Env.From}.String()
		}
		if _, err := f.Apply(b, fold.Event{Seq: uint64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Subject: subj, Raw: raw}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := b.Commit(uint64(len(raws))); err != nil {
		tb.Fatal(err)
	}
	seq := func(context.Context) (uint64, error) { return store.AppliedSeq(), nil }
	fast, err = New(Options{Reader: store, StreamSeq: seq})
	if err != nil {
		tb.Fatal(err)
	}
	slow, err = New(Options{Reader: plainReader{store}, StreamSeq: seq})
	if err != nil {
		tb.Fatal(err)
	}
	return fast, slow
}

// TestListRouteSameBothWays serves a store folded from workloads and the
// hostile corpus through both paths (the stored bytes copied, and the
// records decoded and encoded) and compares every response of the list
// route and of GET /v1/proposals/{id} for each proposal listed.
func TestListRouteSameBothWays(t *testing.T) {
	fast, slow := servedAPIs(t)
	get := func(a *API, q url.Values) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proposals?"+q.Encode(), nil))
		return rec
	}
	getOne := func(a *API, id string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proposals/"+url.PathEscape(id)+"?space=default", nil))
		return rec
	}
	pages, gets := 0, 0
	seen := map[string]bool{"no-such-proposal": false}
	for _, q := range []url.Values{
		{}, {"limit": {"7"}}, {"state": {"pending"}}, {"state": {"rejected"}, "limit": {"100"}},
		{"state": {"fulfilled"}}, {"anomaly": {"unauthorized_withdraw"}}, {"target": {"fs-agent"}},
		{"cursor": {"not-a-cursor"}}, {"state": {"withdrawn"}, "limit": {"3"}},
	} {
		for range 20 { // follow the cursors
			fr, sr := get(fast, q), get(slow, q)
			if fr.Code != sr.Code || !bytes.Equal(fr.Body.Bytes(), sr.Body.Bytes()) || fr.Header().Get("Content-Type") != sr.Header().Get("Content-Type") {
				t.Fatalf("%v: fast %d %s\nslow %d %s", q, fr.Code, fr.Body, sr.Code, sr.Body)
			}
			pages++
			var l struct {
				Proposals []struct {
					ID string `json:"id"`
				} `json:"proposals"`
				NextCursor string `json:"next_cursor"`
			}
			if fr.Code == http.StatusOK {
				if err := json.Unmarshal(fr.Body.Bytes(), &l); err != nil {
					t.Fatalf("%v: %v: %s", q, err, fr.Body)
				}
			}
			for _, p := range l.Proposals {
				seen[p.ID] = true
			}
			if fr.Code != http.StatusOK || l.NextCursor == "" {
				break
			}
			q = url.Values{"cursor": {l.NextCursor}, "state": q["state"], "limit": q["limit"], "anomaly": q["anomaly"], "target": q["target"]}
			for k, v := range q {
				if len(v) == 0 || v[0] == "" {
					delete(q, k)
				}
			}
		}
	}
	for id := range seen {
		fr, sr := getOne(fast, id), getOne(slow, id)
		if fr.Code != sr.Code || !bytes.Equal(fr.Body.Bytes(), sr.Body.Bytes()) || fr.Header().Get("Content-Type") != sr.Header().Get("Content-Type") {
			t.Fatalf("GET %q: fast %d %s\nslow %d %s", id, fr.Code, fr.Body, sr.Code, sr.Body)
		}
		gets++
	}
	if pages < 30 || gets < 100 {
		t.Fatalf("only %d pages and %d proposals compared", pages, gets)
	}
}

// BenchmarkServedRoutes measures GET /v1/proposals/{id} and a list page
// (limit 100) answered from the stored bytes and through the decoding
// path, in one process.
func BenchmarkServedRoutes(b *testing.B) {
	fast, slow := servedAPIs(b)
	rec := httptest.NewRecorder()
	fast.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proposals?limit=100", nil))
	var l struct {
		Proposals []struct {
			ID string `json:"id"`
		} `json:"proposals"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil || len(l.Proposals) == 0 {
		b.Fatalf("list: %v %s", err, rec.Body)
	}
	for _, c := range []struct {
		name string
		a    *API
	}{{"stored", fast}, {"decoded", slow}} {
		b.Run("get/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proposals/"+url.PathEscape(l.Proposals[i%len(l.Proposals)].ID), nil))
				i++
			}
		})
		b.Run("list/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proposals?limit=100", nil))
			}
		})
	}
}
