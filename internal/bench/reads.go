package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/mewledger/ledger/api"
	httpapi "github.com/mewledger/ledger/internal/server/api"
	"github.com/mewledger/ledger/ledger"
	"github.com/mewledger/ledger/projections"
	"github.com/mewledger/ledger/projections/fold"
)

// foldDirect folds events from sg into store, committing every batch
// events (each batch prepared first, as Rebuild and the projector do),
// until stop says so; it calls seen with each decoded event.
func foldDirect(ctx context.Context, store *projections.Store, sg *streamGen, batch int, stop func() bool, seen func(*ledger.Decoded)) (uint64, error) {
	f := fold.NewFolder()
	var last uint64
	evs := make([]fold.Event, 0, batch)
	for !stop() {
		evs = evs[:0]
		for len(evs) < batch && !stop() {
			ev, d, err := sg.next()
			if err != nil {
				return last, err
			}
			evs = append(evs, ev)
			if seen != nil {
				seen(d)
			}
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
		b := store.NewBatch()
		if err := f.Prepare(b, evs); err != nil {
			b.Discard()
			return last, fmt.Errorf("bench: prepare: %w", err)
		}
		for _, ev := range evs {
			if _, err := f.Apply(b, ev); err != nil {
				b.Discard()
				return last, fmt.Errorf("bench: fold seq %d: %w", ev.Seq, err)
			}
		}
		if len(evs) > 0 {
			if err := b.Commit(evs[len(evs)-1].Seq); err != nil {
				return last, fmt.Errorf("bench: commit: %w", err)
			}
			last = evs[len(evs)-1].Seq
		}
		b.Discard()
	}
	return last, nil
}

// readsEnv is the store of the reads figure served by the real API over a
// loopback HTTP server.
type readsEnv struct {
	dir     string
	store   *projections.Store
	srv     *http.Server
	served  chan error
	base    string
	client  *http.Client
	ids     []string // a sample of proposal ids
	cursors []string // list queries: state and cursor, as query strings
	evQs    []string // GET /v1/events filters, as query strings (eventsFilters)
	events  uint64
}

// sampleSize bounds the proposal ids the GETs pick from.
const sampleSize = 8192

// startReads builds a store with o.ReadProposals proposals (the benchmark
// mix, folded directly with the real fold) and serves it.
func startReads(ctx context.Context, o *Options) (r *readsEnv, err error) {
	r = &readsEnv{}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dir, err = os.MkdirTemp(o.TempDir, "ledger-bench-reads-*"); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if r.store, err = projections.OpenStore(projections.StoreOptions{Dir: r.dir, Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	proposals := 0
	start := time.Now()
	r.events, err = foldDirect(ctx, r.store, newStreamGen(o.PadTo, genChunk), 1000,
		func() bool { return proposals >= o.ReadProposals },
		func(d *ledger.Decoded) {
			if d.Type != ledger.TypeProposal {
				return
			}
			proposals++
			if len(r.ids) < sampleSize { // reservoir sample
				r.ids = append(r.ids, d.Env.ID)
			} else if j := rng.IntN(proposals); j < sampleSize {
				r.ids[j] = d.Env.ID
			}
			if proposals%100_000 == 0 {
				progress(o, "reads: %d proposals folded (%v)", proposals, time.Since(start).Round(time.Second))
			}
		})
	if err != nil {
		return nil, err
	}
	progress(o, "reads: store of %d proposals (%d events) built in %v", proposals, r.events, time.Since(start).Round(time.Millisecond))

	a, err := httpapi.New(httpapi.Options{
		Reader:    r.store,
		StreamSeq: func(context.Context) (uint64, error) { return r.store.AppliedSeq(), nil },
		Logger:    o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	r.srv = &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	r.served = make(chan error, 1)
	go func() { r.served <- r.srv.Serve(ln) }()
	r.base = "http://" + ln.Addr().String()
	r.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}

	// List queries: for each state, the first pages' cursors.
	for _, st := range []api.ProposalState{api.StatePending, api.StateFulfilled, api.StateWithdrawn, api.StateRejected} {
		cursor := ""
		for range 10 {
			q := url.Values{"state": {string(st)}, "limit": {"100"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r.cursors = append(r.cursors, q.Encode())
			var page struct {
				NextCursor string `json:"next_cursor"`
			}
			if _, err := r.get(ctx, "/v1/proposals?"+q.Encode(), &page); err != nil {
				return nil, err
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
	}
	r.evQs = eventsFilters
	return r, nil
}

// eventsFilters are the filters of the events figure: each page starts at a
// random sequence (since_seq, or until_seq newest first), limit 100.
var eventsFilters = []string{
	"type=reject", "type=fulfil&effect=applied", "effect=late", "type=withdraw&order=desc",
	"type=proposal&order=desc", "kind=mcp/response", "",
}

// eventsPage returns a random filtered events query.
func (r *readsEnv) eventsPage(rng *rand.Rand) string {
	q := r.evQs[rng.IntN(len(r.evQs))]
	at := 1 + rng.Uint64N(max(r.events, 1))
	bound := "since_seq"
	if len(q) >= 10 && q[len(q)-10:] == "order=desc" {
		bound = "until_seq"
	}
	if q != "" {
		q += "&"
	}
	return fmt.Sprintf("/v1/events?%s%s=%d&limit=100", q, bound, at)
}

// genChunk is the number of events of each generator of a streamGen.
const genChunk = 100_000

// get requests path and returns how long it took; into, when not nil,
// receives the decoded body.
func (r *readsEnv) get(ctx context.Context, path string, into any) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("bench: GET %s: %w", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("bench: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("bench: GET %s: %s: %s", path, resp.Status, body)
	}
	if into != nil {
		if err := json.Unmarshal(body, into); err != nil {
			return 0, fmt.Errorf("bench: GET %s: %w", path, err)
		}
	}
	return took, nil
}

// readsResult is one repetition of the reads figure.
type readsResult struct {
	getP50, getP99, listP50, listP99 time.Duration
	evP50, evP99                     time.Duration
}

// measureReads runs gets GETs of random sampled proposals and lists list
// pages at random sampled positions, one request at a time.
func (r *readsEnv) measure(ctx context.Context, rep, gets, lists int) (readsResult, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(rep)+2))
	// Warm the connection and the handler's paths.
	for range 50 {
		if _, err := r.get(ctx, "/v1/proposals/"+url.PathEscape(r.ids[rng.IntN(len(r.ids))]), nil); err != nil {
			return readsResult{}, err
		}
	}
	g := make([]time.Duration, gets)
	for i := range g {
		d, err := r.get(ctx, "/v1/proposals/"+url.PathEscape(r.ids[rng.IntN(len(r.ids))]), nil)
		if err != nil {
			return readsResult{}, err
		}
		g[i] = d
	}
	l := make([]time.Duration, lists)
	for i := range l {
		d, err := r.get(ctx, "/v1/proposals?"+r.cursors[rng.IntN(len(r.cursors))], nil)
		if err != nil {
			return readsResult{}, err
		}
		l[i] = d
	}
	e := make([]time.Duration, lists)
	for i := range e {
		d, err := r.get(ctx, r.eventsPage(rng), nil)
		if err != nil {
			return readsResult{}, err
		}
		e[i] = d
	}
	return readsResult{
		getP50: durQuantile(g, 0.5), getP99: durQuantile(g, 0.99),
		listP50: durQuantile(l, 0.5), listP99: durQuantile(l, 0.99),
		evP50: durQuantile(e, 0.5), evP99: durQuantile(e, 0.99),
	}, nil
}

// close stops the server and removes the store.
func (r *readsEnv) close() {
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.srv.Shutdown(ctx)
		cancel()
		<-r.served // http.ErrServerClosed, or an error after the figures were taken
	}
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	if r.store != nil {
		_ = r.store.Close()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}
