package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mewledger/ledger/api"
	"github.com/mewledger/ledger/internal/lib/logging"
	"github.com/mewledger/ledger/internal/server/connbudget"
)

// GET /v1/watch (contract §7): Server-Sent Events, one per change of a
// proposal's state or anomalies, read from the projection's change index
// (projections.Store.Changes).
//
// Contract:
//   - Filters: space (default: the API's default space), proposal (one
//     id), state (the state after the change). since_seq=N starts after
//     sequence N; a Last-Event-ID header (an EventSource reconnecting) wins
//     over since_seq. Without either the stream starts at the projection's
//     checkpoint: only changes folded from now on.
//   - Each change is one SSE message `event: change`, `data:` the
//     projections.Change as JSON, in stream order (then space, then id).
//     Several changes may share a sequence (a batch rejection): only the
//     last one sent of a sequence carries `id: <seq>`, so a client that
//     reconnects with the Last-Event-ID it saw resumes after a sequence it
//     has received whole, and misses nothing.
//   - Every HeartbeatInterval without a change the server sends a comment
//     line and an id-only message `id: <checkpoint>`: the position moves
//     past changes the filters skipped, and proxies keep the stream open.
//   - Nothing waits for a watcher: each reads the change index at its own
//     pace, at most WatchPage changes at a time (its buffer), and a write
//     that does not complete within WatchWriteTimeout (a client that stopped
//     reading) drops the client. The projector only commits and wakes them.
//   - API.StopWatches (the server's shutdown) ends every stream.

// Watch defaults (Options).
const (
	DefaultHeartbeat         = 15 * time.Second
	DefaultWatchWriteTimeout = 10 * time.Second
	DefaultWatchPage         = 256
	// watchScan bounds the index entries one read looks at for a filtered
	// watch, so that a narrow filter over a long resume does not hold a
	// snapshot for long.
	watchScan = 8192
)

// Watch route and parameters.
const (
	RouteWatch        = "GET /v1/watch"
	paramProposal     = "proposal"
	paramSinceSeq     = "since_seq"
	headerLastEventID = "Last-Event-ID"
)

// ChangeReader is what /v1/watch needs from the live projection.
// *projections.Store implements it.
type ChangeReader interface {
	Changes(after uint64, limit, scan int, keep func(*api.Change) bool) ([]api.Change, uint64, bool, error)
}

// errNoChanges: the reader keeps no change index.
var errNoChanges = errors.New("api: the projection keeps no change index")

// Changes reads the live reader's change index.
func (s *swapReader) Changes(after uint64, limit, scan int, keep func(*api.Change) bool) ([]api.Change, uint64, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	cr, ok := s.r.(ChangeReader)
	if !ok {
		return nil, 0, false, errNoChanges
	}
	return cr.Changes(after, limit, scan, keep)
}

// watchers ends the watch streams on shutdown.
type watchers struct {
	once sync.Once
	stop chan struct{}
}

func newWatchers() *watchers { return &watchers{stop: make(chan struct{})} }

// StopWatches ends every /v1/watch stream, now and later (an
// http.Server's Shutdown does not cancel requests in flight: register it
// with RegisterOnShutdown). Safe to call twice.
func (a *API) StopWatches() { a.watch.once.Do(func() { close(a.watch.stop) }) }

// watchFilter is a watch's parsed query.
type watchFilter struct {
	space, proposal string
	state           api.ProposalState
	after           uint64
	fromNow         bool
	afterField      string // the parameter or header after came from
}

// firstChanges reads the first page of changes of a watch or changes
// request; on an error it answers it as JSON (501 when the projection
// keeps no change index) and returns ok false.
func (a *API) firstChanges(w http.ResponseWriter, r *http.Request, f *watchFilter, limit int) (cs []api.Change, through uint64, more, ok bool) {
	cs, through, more, err := a.reader.Changes(f.after, limit, watchScan, f.keep)
	if errors.Is(err, errNoChanges) {
		writeError(w, http.StatusNotImplemented, &api.Error{Code: api.CodeUnavailable, Message: "this server's projection keeps no change index"})
		return nil, 0, false, false
	}
	if err != nil {
		a.internal(w, r, err)
		return nil, 0, false, false
	}
	return cs, through, more, true
}

// holes reports whether the watch sends hole changes (`event: holes`):
// unless it follows one proposal or one state.
func (f *watchFilter) holes() bool { return f.proposal == "" && f.state == "" }

func (f *watchFilter) keep(c *api.Change) bool {
	return c.Space == f.space && (f.proposal == "" || c.ID == f.proposal) && (f.state == "" || c.State == f.state)
}

func (a *API) parseWatch(r *http.Request) (*watchFilter, *api.Error) {
	q := r.URL.Query()
	if e := params(q, paramSpace, paramProposal, paramState, paramSinceSeq, paramMinSeq); e != nil {
		return nil, e
	}
	space, e := a.space(q)
	if e != nil {
		return nil, e
	}
	f := &watchFilter{space: space, proposal: q.Get(paramProposal), fromNow: true}
	if v := q.Get(paramState); v != "" {
		st := api.ProposalState(v)
		if !validState(st) {
			return nil, badParam(paramState, "unknown state %q (want one of %s)", v, joinStates())
		}
		f.state = st
	}
	if v := q.Get(paramSinceSeq); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, badParam(paramSinceSeq, "since_seq must be a stream sequence (a non-negative integer), not %q", echo(v))
		}
		f.after, f.fromNow, f.afterField = n, false, paramSinceSeq
	}
	if v := r.Header.Get(headerLastEventID); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, &api.Error{Code: api.CodeBadRequest, Field: headerLastEventID,
				Message: fmt.Sprintf("Last-Event-ID must be a stream sequence, not %q", echo(v))}
		}
		f.after, f.fromNow, f.afterField = n, false, headerLastEventID
	}
	return f, nil
}

// watchPrologue parses a watch or changes request, waits for its min_seq
// (as every read does) and refuses a since_seq / Last-Event-ID past the
// end of the log: a sequence this log never had (another ledger's, or
// one from before the log was reset) would otherwise wait silently for
// changes that were already missed. On false it has answered.
func (a *API) watchPrologue(w http.ResponseWriter, r *http.Request) (*watchFilter, bool) {
	f, e := a.parseWatch(r)
	if e != nil {
		writeError(w, http.StatusBadRequest, e)
		return nil, false
	}
	if !a.waitMinSeq(w, r, r.URL.Query()) {
		return nil, false
	}
	if !f.fromNow && f.after > a.reader.AppliedSeq() {
		last, err := a.opts.StreamSeq(r.Context())
		if err == nil && f.after > last {
			code := api.CodeBadQuery
			if f.afterField == headerLastEventID {
				code = api.CodeBadRequest
			}
			writeError(w, http.StatusBadRequest, &api.Error{Code: code, Field: f.afterField,
				Message: fmt.Sprintf("%s %d is past the end of the log (its last sequence is %d): a sequence of another ledger, or of a log that was reset; start again without it", f.afterField, f.after, last)})
			return nil, false
		}
	}
	return f, true
}

func validState(st api.ProposalState) bool {
	for _, s := range api.States {
		if s == st {
			return true
		}
	}
	return false
}

func (a *API) watchChanges(w http.ResponseWriter, r *http.Request) {
	f, ok := a.watchPrologue(w, r)
	if !ok {
		return
	}
	// A watch is a server wait: it counts against the caller's share of
	// waiting requests as a min_seq long poll does (issue 36 item 4; an
	// MCP wait_for_decision is a watch made for its caller), so that one
	// caller's watchers cannot take what another needs. Over the share it
	// is refused at once, 429 too_many_holds.
	release, herr := connbudget.Hold(r.Context())
	if herr != nil {
		connbudget.WriteRefusal(w, herr)
		return
	}
	defer release()
	if f.fromNow {
		f.after = a.reader.AppliedSeq()
	}
	// The first read answers errors as JSON, before the stream starts.
	cs, through, more, ok := a.firstChanges(w, r, f, a.opts.WatchPage)
	if !ok {
		return
	}
	var err error
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	log := a.log.With().Str(logging.KeyRoute, RouteWatch).Str(logging.KeySpace, f.space).Logger()

	var buf bytes.Buffer
	fmt.Fprintf(&buf, ": watching space %q from seq %d\nretry: 2000\n\n", f.space, f.after)
	send := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(a.opts.WatchWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		buf.Reset()
		return rc.Flush()
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	lastID := f.after
	heartbeat := time.NewTimer(a.opts.HeartbeatInterval)
	defer heartbeat.Stop()
	for {
		var hs []api.HoleChange
		if f.holes() {
			if hs, err = a.reader.HoleChanges(f.space, f.after, through); err != nil {
				log.Error().Err(err).Msg("watch: read hole changes")
				return
			}
		}
		if lastID, err = writeWatchPage(&buf, enc, cs, hs, lastID); err != nil {
			a.log.Error().Err(err).Msg("watch: encode change")
			return
		}
		if buf.Len() > 0 {
			if err := send(); err != nil {
				log.Info().Err(err).Uint64(logging.KeySeq, lastID).Msg("watch client dropped (gone, or not reading)")
				return
			}
		}
		f.after = through
		if !more {
			// Wait for the next commit, the heartbeat, the client or the
			// shutdown.
			ctx, cancel := context.WithCancel(r.Context())
			woke := make(chan error, 1)
			go func() { woke <- a.reader.WaitApplied(ctx, through+1) }()
			select {
			case err = <-woke:
			case <-heartbeat.C:
				fmt.Fprintf(&buf, ": heartbeat\nid: %d\n\n", f.after)
				lastID = f.after
				heartbeat.Reset(a.opts.HeartbeatInterval)
			case <-a.watch.stop:
				cancel()
				<-woke
				return
			}
			cancel()
			if buf.Len() > 0 {
				<-woke
				err = nil
			}
			if err != nil {
				return // the client went away, or the store closed
			}
			if buf.Len() > 0 {
				if err := send(); err != nil {
					log.Info().Err(err).Uint64(logging.KeySeq, lastID).Msg("watch client dropped (gone, or not reading)")
					return
				}
			}
		}
		select {
		case <-a.watch.stop:
			return
		default:
		}
		if cs, through, more, err = a.reader.Changes(f.after, a.opts.WatchPage, watchScan, f.keep); err != nil {
			log.Error().Err(err).Msg("watch: read changes")
			return
		}
	}
}

// GET /v1/changes: the change index as JSON pages, for charts and scripts
// that want a bounded window rather than a stream. Same filters as
// /v1/watch (space, proposal, state, since_seq; default since_seq 0) and
// limit (1..1000, default 256). Answers {"changes":[...],"through":N,
// "more":bool}: the next page is since_seq=through; more is false when
// every change up to the projection's checkpoint (through) was read. The
// page also carries "hole_changes": the changes of the space's holes in
// the same window, as /v1/watch sends them (changes_holes.go).
const (
	RouteChanges     = "GET /v1/changes"
	maxChangesLimit  = 1000
	defaultChangeLim = 256
)

// ChangesPage is the body of GET /v1/changes (api.ChangesPage).
type ChangesPage = api.ChangesPage

func (a *API) listChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultChangeLim
	if v := q.Get(paramLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxChangesLimit {
			writeError(w, http.StatusBadRequest, badParam(paramLimit, "limit must be an integer in 1..%d, not %q", maxChangesLimit, v))
			return
		}
		limit = n
		q.Del(paramLimit)
		r.URL.RawQuery = q.Encode()
	}
	f, ok := a.watchPrologue(w, r)
	if !ok {
		return
	}
	cs, through, more, ok := a.firstChanges(w, r, f, limit)
	if !ok {
		return
	}
	if cs == nil {
		cs = []api.Change{}
	}
	hs, err := a.pageHoleChanges(f, through)
	if err != nil {
		a.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ChangesPage{Changes: cs, HoleChanges: hs, Through: through, More: more})
}

// HoleChangeReader is what /v1/watch needs to send hole changes.
// *projections.Store implements it.
type HoleChangeReader interface {
	HoleChanges(space string, after, through uint64) ([]api.HoleChange, error)
}

// HoleChanges reads the live reader's hole change index (none when it
// keeps none).
func (s *swapReader) HoleChanges(space string, after, through uint64) ([]api.HoleChange, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	hr, ok := s.r.(HoleChangeReader)
	if !ok {
		return nil, nil
	}
	return hr.HoleChanges(space, after, through)
}

// writeWatchPage writes the changes cs and hole changes hs, both in
// stream order, as SSE messages merged in stream order (at one sequence
// the proposals' changes first): `event: change` and `event: holes`. The
// last message of each sequence carries `id: <seq>`. It returns the last
// id written (lastID when none).
func writeWatchPage(buf *bytes.Buffer, enc *json.Encoder, cs []api.Change, hs []api.HoleChange, lastID uint64) (uint64, error) {
	i, j := 0, 0
	for i < len(cs) || j < len(hs) {
		var seq uint64
		var v any
		if j == len(hs) || (i < len(cs) && cs[i].Seq <= hs[j].Seq) {
			seq, v = cs[i].Seq, &cs[i]
			buf.WriteString("event: change\n")
			i++
		} else {
			seq, v = hs[j].Seq, &hs[j]
			buf.WriteString("event: holes\n")
			j++
		}
		nextSeq, more := uint64(0), false
		switch {
		case i < len(cs) && (j == len(hs) || cs[i].Seq <= hs[j].Seq):
			nextSeq, more = cs[i].Seq, true
		case j < len(hs):
			nextSeq, more = hs[j].Seq, true
		}
		if !more || nextSeq != seq {
			fmt.Fprintf(buf, "id: %d\n", seq)
			lastID = seq
		}
		buf.WriteString("data: ")
		if err := enc.Encode(v); err != nil { // ends with \n
			return lastID, err
		}
		buf.WriteString("\n")
	}
	return lastID, nil
}
