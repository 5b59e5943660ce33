package api

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/workload"
	"github.com/mewledger/ledger/internal/testkit/badinput"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
	"github.com/mewledger/ledger/subjects"
)

// decodedListBody is what the decoding path writes for the stored records.
func decodedListBody(t *testing.T, page projections.RawPage) []byte {
	t.Helper()
	l := api.List{Proposals: []*api.Proposal{}, NextCursor: page.NextCursor}
	for _, rec := range page.Proposals {
		var p api.Proposal
		if err := json.Unmarshal(rec, &p); err != nil {
			t.Fatal(err)
		}
		l.Proposals = append(l.Proposals, normalize(&p))
	}
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, l)
	return rec.Body.Bytes()
}

var rawStrings = []string{"", "plain", "<b>&amp;</b>", `\u003c`, `back\slash`, `q"uote`, "\\\\<", "é😀", "\u2028",
	"tab\tnl\n", "\x01", "bad\xffutf8", `a\\u003cb`, "&&&", ">"}

// TestRawListBodyMatchesDecodingPath stores random proposals with hostile
// strings and params as json.Marshal does, and requires the fast path to
// write the decoding path's bytes.
func TestRawListBodyMatchesDecodingPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := func() string {
		if rng.IntN(10) < 8 {
			return rawStrings[rng.IntN(5)] // the first ones take the fast path
		}
		return rawStrings[rng.IntN(len(rawStrings))]
	}
	params := []json.RawMessage{nil, json.RawMessage(`{"h":"<b>&","e":"\u003c"}`), json.RawMessage(`{ "a" : [1, "x"] }`),
		json.RawMessage(`{"u":"` + "\u2028" + `"}`), json.RawMessage(`"<"`), json.RawMessage(`{"params":"<x>"}`)}
	fastRecords, records := 0, 0
	for range 3000 {
		var page projections.RawPage
		for range rng.IntN(6) {
			p := &api.Proposal{ID: s(), Space: s(), State: api.StatePending, Proposer: s(), Method: s(),
				Params: params[rng.IntN(len(params))], Dialect: s(), Context: s(), Reason: s(), Digest: s(),
				CreatedAt: time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)).UTC()}
			if rng.IntN(4) > 0 {
				p.To = []string{s(), s()}
			}
			if rng.IntN(4) > 0 {
				p.Rejections = []api.Rejection{{Event: s(), From: s(), Reason: s(), Explanation: s()}}
			}
			if rng.IntN(4) > 0 {
				p.Fulfillments = []api.Fulfillment{{Event: s(), Anomalies: []string{s()}}}
			}
			if rng.IntN(4) > 0 {
				p.Anomalies = []string{s()}
			}
			if rng.IntN(3) == 0 {
				p.Withdrawal = &api.Withdrawal{Event: s(), Reason: s(), Explanation: s()}
			}
			if rng.IntN(10) == 0 {
				p.Kernel = &api.Kernel{ActionType: api.ActionWrite, Target: &api.KernelTarget{ResourceID: s(), Constraints: json.RawMessage(`{"x":"<y>"}`)}}
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			page.Proposals = append(page.Proposals, b)
			records++
			if _, ok := appendAPIRecord(nil, b); ok {
				fastRecords++
			}
		}
		if rng.IntN(2) == 0 {
			page.NextCursor = "AAAAAAAAAAAAB2lkLTE"
		}
		got, err := rawListBody(page)
		if err != nil {
			t.Fatal(err)
		}
		if want := decodedListBody(t, page); !bytes.Equal(got, want) {
			t.Fatalf("fast path:\n%s\ndecoding path:\n%s", got, want)
		}
	}
	if fastRecords < records/10 {
		t.Fatalf("only %d of %d records took the fast path", fastRecords, records)
	}
	t.Logf("%d of %d records took the fast path", fastRecords, records)
}

// plainReader hides the store's ListRaw: the API takes the decoding path.
type plainReader struct{ Reader }

// TestListRouteSameBothWays serves a store folded from workloads and the
// hostile corpus through both paths and compares every response.
func TestListRouteSameBothWays(t *testing.T) {
	store, err := projections.OpenStore(projections.StoreOptions{FS: vfs.NewMem(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var raws [][]byte
	g := workload.New(workload.Options{Seed: 5, PadTo: 300, Disorder: 10, Foreign: 10,
		Mix: workload.Mix{Fulfil: 20, Withdraw: 10, Reject: 15, Response: 10, Chat: 10}})
	raws = append(raws, g.Batch(1500)...)
	cases, err := badinput.LoadDefault()
	if err != nil {
		t.Fatal(err)
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
			t.Fatal(err)
		}
	}
	if err := b.Commit(uint64(len(raws))); err != nil {
		t.Fatal(err)
	}
	seq := func(context.Context) (uint64, error) { return store.AppliedSeq(), nil }
	fast, err := New(Options{Reader: store, StreamSeq: seq})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := New(Options{Reader: plainReader{store}, StreamSeq: seq})
	if err != nil {
		t.Fatal(err)
	}
	get := func(a *API, q url.Values) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/proposals?"+q.Encode(), nil))
		return rec
	}
	pages := 0
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
				NextCursor string `json:"next_cursor"`
			}
			if fr.Code != http.StatusOK || json.Unmarshal(fr.Body.Bytes(), &l) != nil || l.NextCursor == "" {
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
	if pages < 30 {
		t.Fatalf("only %d pages compared", pages)
	}
}
